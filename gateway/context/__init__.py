"""The context policy: what a conversation may cost in prompt tokens before it goes upstream (a cap,
middle-out trimming, tool outputs said once). Pure logic over message lists in `conversation` and
`plan`; which block applies, and the one step that applies it to a request, in `policy`."""
