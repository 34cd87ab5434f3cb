"""Cheap, model-free features of an OpenAI chat request body that hint at how hard it is to answer.

Everything here runs on the request path, so it costs microseconds: no tokenizer, and the text is
scanned as bytes with C-level `count`/`translate` calls plus a few anchored regexes. Lengths are
counted over every message (the system prompt's apart); the text itself is read only from the last
user message (and the head of the system prompt), at most `SAMPLE_CHARS` of it: a head and a tail
of a long message say what is asked, the middle is usually the document it is asked about. So a
50k-token prompt costs what a 400-token one does.

The features are meant to carry over to traffic unlike the training data (`data/routing/README.md`):
none keys on one data set's template (an `Answer:` suffix, say). Which of them get a weight, and
why some get none, is the training script's business (`training/router/train_router.py`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from gateway.routing.languages import CJK_LEADS, WORD_PUNCTUATION, foreign_cues

FEATURE_NAMES: tuple[str, ...] = (
    "prompt_tokens",  # log1p of approximate tokens in the conversation (not the system prompt) and tools
    "material_tokens",  # log1p of approximate tokens of text pasted beside a short ask (see _split_ask)
    "system_tokens",  # log1p of approximate tokens in system / developer messages
    "conversation_turns",  # log1p of earlier assistant turns
    "tools",  # log1p of tools (or legacy functions) offered
    "tool_results",  # log1p of tool / function result messages already in the conversation
    "structured_output",  # 1 for a JSON schema, 0.5 for JSON mode, 0 for free text
    "long_output",  # log2(max tokens / 1024), 0 below 1024 or when absent, at most 6
    "reasoning_effort",  # 0 none / minimal / low, 0.5 medium, 1 high
    "images",  # log1p of image, audio and file parts
    "code_blocks",  # log1p of fenced code blocks
    "code_symbols",  # share of bytes that are code punctuation: { } ; = < > [ ] _ ( )
    "code_keywords",  # distinct programming words (def, async, nullptr, kubectl, ...)
    "math_notation",  # log1p of LaTeX / math marks (^ \ $) and spaced = and + signs
    "digits",  # share of bytes that are digits
    "numbers",  # log1p of distinct digit runs
    "number_size",  # digits in the longest digit run, at most 12 (bigger numbers, harder arithmetic)
    "reasoning_cues",  # distinct reasoning cues ("explain why", "calculate", "step by step", ...)
    "expert_cues",  # distinct expert-task cues ("prove", "theorem", "thread-safe", "trade-offs", ...)
    "routine_cues",  # distinct routine-task cues ("summarize", "translate", "proofread", "extract", ...)
    "multi_step",  # log1p of list items and sequencing words ("first", "then", "finally", ...)
    "conditionals",  # distinct conditional / hypothetical cues ("if", "suppose", "unless", ...)
    "quantities",  # distinct quantitative-relation cues ("than", "twice", "per", "average", ...)
    "constraints",  # log1p of constraint words and phrases ("must", "at least", "do not", ...)
    "negation_cues",  # capitalised traps: NOT, EXCEPT, LEAST, FALSE, INCORRECT, NEVER
    "questions",  # log1p of question marks
    "multiple_choice",  # 1 when three or more lettered options (A. B. C. / (a) (b) (c)) start lines
    "sentences",  # log1p of sentence ends
    "clauses",  # log1p of commas and semicolons
    "capitals",  # share of Latin letters that are capitals (names, acronyms, variables), smoothed
    "non_ascii",  # share of non-ASCII characters (other scripts and languages)
    "non_english",  # 1 for Latin-script text in another language (its function words, not English's)
)

SAMPLE_CHARS = 1024  # characters of the last user message that are read
_TAIL_CHARS = 384  # of those, taken from its end when it is longer
_SYSTEM_CHARS = 512  # characters of the system prompt read for instruction cues
_CHARS_PER_TOKEN = 4.0
_TOOL_CHARS = 256  # a typical tool definition: counted, not serialised just to be measured
_TOOL_CALL_CHARS = 64
_ASK_CHARS = 400  # an ask is at most this long; a pasted document is text beside it
_MATERIAL_MIN = 600  # shorter messages are read as all ask
# A Chinese or Japanese character (kana included) counts as this many characters of length: it
# carries what three or four English letters do, so counted as one the same request in Chinese was
# a quarter of its English length, and length is the heaviest feature. Set without labels, so that
# probe set F translated into Chinese and Japanese has F's mean length (`data/routing/probes/`).
CJK_CHAR_WEIGHT = 2.6
# What `capitals` reads for a request in another language: the typical share (the fitted mean is
# 0.053). In another script the Latin letters left are mostly acronyms and names, and German
# capitalises its nouns: read as English, they lifted F's Chinese, Japanese and Russian
# translations by +1.0 on the logit on average, and the German by +0.4.
_TYPICAL_CAPITALS = 0.05
_OTHER_LANGUAGE_SCRIPT = 0.15  # a non-ASCII share from which a message is read as another language

_TO_SPACE = bytes.maketrans(WORD_PUNCTUATION, b" " * len(WORD_PUNCTUATION))
_DIGITS = b"0123456789"
_ONLY_DIGITS = bytes(c if c in _DIGITS else 32 for c in range(256))  # everything else -> space
_CAPITALS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWERCASE = b"abcdefghijklmnopqrstuvwxyz"
_CODE_SYMBOLS = b"{};=<>[]_()"
_MATH_SYMBOLS = b"^\\$"
# Anchored on a literal newline rather than (?m)^, which lets the regex engine skip to candidates
# (15x faster); the text is matched with a newline in front.
_OPTION = re.compile(rb"\n[ \t]*\(?([A-Ha-h])[.):][ \t]")
_LIST_ITEM = re.compile(rb"\n[ \t]*(?:\d{1,2}[.)]|[-*]|\xe2\x80\xa2)[ \t]")
_ENDS_TO_STOP = bytes.maketrans(b"?!", b"..")

_CODE_WORDS = frozenset(
    b"def elif lambda async await const var let void int str bool struct enum impl fn pub println "
    b"printf cout cin std include namespace null nullptr undefined isinstance self this args kwargs "
    b"func dict tuple regex sql json yaml api http https git bash sudo npm pip docker kubectl "
    b"python javascript typescript java rust golang kotlin swift php ruby html css compile compiler "
    b"runtime exception traceback stacktrace segfault debug refactor codebase repository endpoint "
    b"algorithm recursion recursive".split()
)
_REASONING_WORDS = frozenset(
    b"justify explain why analyze analyse analysis evaluate compare contrast reason reasoning infer "
    b"deduce implies implication therefore hence calculate compute determine estimate critique "
    b"assess argue hypothesis step steps step-by-step strategy plan debug diagnose".split()
)
# Words of work a small model does badly: proofs, systems and concurrency, design trade-offs. Exam
# questions name them rarely, so the data barely weigh them; the training script gives them a floor.
_EXPERT_WORDS = frozenset(
    b"prove proof proofs derive derivation theorem lemma corollary rigorous rigorously induction "
    b"counterexample invariant invariants asymptotic optimal optimality np-hard formalize formalise "
    b"design architect architecture scalable scalability distributed consensus replication sharding "
    b"idempotent idempotency linearizable serializable concurrency concurrent thread-safe lock-free "
    b"deadlock deadlocks mutex tradeoff tradeoffs trade-off trade-offs implement optimize optimise "
    b"refactor".split()
)
# Work on text the user supplies, which small models do well however long the text: the ask is
# easy even when the prompt is not short.
_ROUTINE_WORDS = frozenset(
    b"summarize summarise summary summarization tldr translate extract reformat proofread typo "
    b"typos grammar spelling rewrite rephrase paraphrase classify categorize categorise convert "
    b"shorten".split()
)
# Phrases, each behind a word it contains: a set lookup spares a scan when the word is absent.
_REASONING_PHRASES = (
    (b"step", b"step by step"),
    (b"why", b"explain why"),
    (b"what", b"what if"),
    (b"would", b"how would"),
)
_EXPERT_PHRASES = (
    (b"show", b"show that"),
    (b"race", b"race condition"),
    (b"edge", b"edge cases"),
)
_SEQUENCE_WORDS = frozenset(
    b"first second third fourth then next finally afterwards subsequently before after until".split()
)
_CONDITIONAL_WORDS = frozenset(
    b"if suppose supposing assume assuming unless otherwise whereas hypothetically given".split()
)
_QUANTITY_WORDS = frozenset(
    b"than twice thrice half double triple times average each per every remaining total ratio rate "
    b"percent percentage proportion older younger age ages".split()
)
_CONSTRAINT_WORDS = frozenset(
    b"must should shall exactly only never always without ensure required require requires "
    b"mandatory strictly maximum minimum limit within".split()
)
_CONSTRAINT_PHRASES = (
    (b"least", b"at least"),
    (b"most", b"at most"),
    (b"more", b"more than"),  # also "no more than"
    (b"less", b"less than"),
    (b"not", b"do not"),
    (b"don't", b"don't"),
    (b"sure", b"make sure"),
    (b"format", b"in the format"),
    (b"limit", b"word limit"),
)
# A Latin-script message in another language (`non_english`): two or more function words of
# French, Spanish, German, Portuguese or Italian and at most one English one. With fewer than two
# English ones a message is not evidently English, and the cue lists of `languages` are read too.
# Words either language uses ("a", "in", "die", "do", "con", "per", "la") count for neither; LaTeX
# and code have no function words, so are not flagged.
_ENGLISH_WORDS = frozenset(
    b"the and of to is that for with this are be it you from have by or not what how can your which "
    b"there their should would about into than if when does we they our my at as but were been had "
    b"could who why where then them these those some any just like get need want please using use "
    b"its each only more out up one me".split()
)
OTHER_LANGUAGE_WORDS = frozenset(
    "de des du et est une au aux pour dans sur avec qui que pas ce cette sont nous vous "  # French
    "el los las del y por para como más pero muy una "  # Spanish
    "der das und ist nicht mit für zu dem eine auf sich auch wir bitte oder wie "  # German
    "os dos não com uma pelo pela você "  # Portuguese
    "gli della di che è nel sul questo anche sono".encode().split()  # Italian
)
_NEGATIONS = (b"NOT", b"EXCEPT", b"LEAST", b"FALSE", b"INCORRECT", b"NEVER")
_MEDIA_PARTS = frozenset({"image_url", "input_audio", "file", "image", "audio"})
_EFFORT = {"medium": 0.5, "high": 1.0, "xhigh": 1.0}


def extract_features(body: dict[str, Any]) -> list[float]:
    """The features of one chat request body, in `FEATURE_NAMES` order. Never raises on odd input."""
    return read_request(body)[0]


def read_request(body: dict[str, Any]) -> tuple[list[float], set[bytes]]:
    """`extract_features` and the lower-cased, punctuation-split words of the last user message's
    ask, which the classifier's lexicon weighs. Not the system prompt's: an application sends the
    same one with every request, so its words would shift every score alike and dilute the words
    that tell one request from another (the lexicon was fitted on prompts without one). Not a
    pasted document's either: its words say what the document is about (dates, e-mails, column
    names), not what is asked of it, and the lexicon learnt them as "easy" from our traffic sets,
    whose pasted documents came mostly with easy asks."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        messages = []
    total_chars = system_chars = assistant_turns = tool_results = media = 0
    last_user: Any = None
    system_head = ""
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        chars, parts_media = _measure(content)
        total_chars += chars
        media += parts_media
        if role == "user":
            last_user = content
        elif role == "assistant":
            assistant_turns += 1
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                total_chars += _TOOL_CALL_CHARS * len(calls)
        elif role == "system" or role == "developer":
            system_chars += chars
            if len(system_head) < _SYSTEM_CHARS:
                system_head += _sample(content, _SYSTEM_CHARS - len(system_head), 0)
        elif role == "tool" or role == "function":
            tool_results += 1
    tools = body.get("tools")
    if not isinstance(tools, list):
        tools = body.get("functions")
    n_tools = len(tools) if isinstance(tools, list) else 0
    total_chars += _TOOL_CHARS * n_tools
    cues, words, scale = _text_cues(_sample(last_user, SAMPLE_CHARS, _TAIL_CHARS), system_head)
    ask, material = _split_ask(last_user, scale)
    if scale != 1.0:  # Chinese or Japanese: the sample's share of their characters counts more
        total_chars += int((scale - 1.0) * (total_chars - system_chars))
        material = int(material * scale)
    if material:  # the ask is then one text shorter than _ASK_CHARS: read whole
        words = _words(ask.encode("utf-8", "replace").lower())
    return [
        # The system prompt is the application's, the same in every request: `system_tokens` weighs
        # it. Counted here too, a 60-token one lifted every short request by +2.3 on the logit.
        _log_tokens(total_chars - system_chars),
        _log_tokens(material),
        _log_tokens(system_chars),
        math.log1p(assistant_turns),
        math.log1p(n_tools),
        math.log1p(tool_results),
        _structured_output(body.get("response_format")),
        _long_output(body),
        _reasoning_effort(body.get("reasoning_effort")),
        math.log1p(media),
        *cues,
    ], words


def last_user_sample(body: dict[str, Any]) -> str:
    """The part of the last user message the text features read (head and tail, `SAMPLE_CHARS` at
    most): also what the optional second stage embeds, so both stages look at the same words."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _sample(message.get("content"), SAMPLE_CHARS, _TAIL_CHARS)
    return ""


def feature_dict(body: dict[str, Any]) -> dict[str, float]:
    """`extract_features` keyed by name, for tests and explanations (not the hot path)."""
    return dict(zip(FEATURE_NAMES, extract_features(body), strict=True))


def _split_ask(content: Any, scale: float) -> tuple[Any, int]:
    """The ask of a message, and the characters of a document the user pasted beside it ("Summarize
    this:" and an e-mail, or a log and then "what failed?"): the text after a short first paragraph
    or before a short last one, or every text part after a short first part. The document's length
    says how much there is to read, not how hard the ask is; exam questions, which taught the length
    feature, have none. Without a document the whole message is the ask."""
    ask_chars = int(_ASK_CHARS / scale)  # Chinese and Japanese: in characters of English length
    if isinstance(content, str):
        size = len(content)
        if size * scale < _MATERIAL_MIN:
            return content, 0
        for mark in ("\n\n", ":\n", "\uff1a\n"):  # the last a full-width colon
            ask_end = content.find(mark, 0, ask_chars)
            if ask_end != -1:
                return content[:ask_end], size - ask_end
        ask_start = content.rfind("\n\n", size - ask_chars)
        return (content[ask_start:], ask_start) if ask_start != -1 else (content, 0)
    if isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        sizes = [len(text) for text in texts]
        if len(sizes) > 1 and sizes[0] < ask_chars and sum(sizes) * scale >= _MATERIAL_MIN:
            return texts[0], sum(sizes) - sizes[0]
    return content, 0


def _measure(content: Any) -> tuple[int, int]:
    """Characters of text in a message's content (a string or a list of parts), and media parts."""
    if isinstance(content, str):
        return len(content), 0
    if not isinstance(content, list):
        return 0, 0
    chars = media = 0
    for part in content:
        if isinstance(part, dict):
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else 0
            elif kind in _MEDIA_PARTS:
                media += 1
    return chars, media


def _sample(content: Any, limit: int, tail: int) -> str:
    """At most `limit` characters of a content's text: all of it, or its head and `tail` of its end."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if sum(len(t) for t in texts) > 4 * limit:  # do not join a long document just to cut it
            texts = texts[:1] + texts[-1:] if len(texts) > 1 else texts
        text = "\n".join(texts)
    else:
        return ""
    if len(text) <= limit:
        return text
    head = text[: limit - tail]
    return head + "\n" + text[-tail:] if tail else head


def _text_cues(sample: str, system_head: str) -> tuple[list[float], set[bytes], float]:
    """The text features (from `code_blocks` on), of the sample of the last user message and of the
    system prompt's head for instruction cues; the words of the user's sample alone; and what its
    length counts per character (`CJK_CHAR_WEIGHT`)."""
    raw = sample.encode("utf-8", "replace")
    size = max(len(raw), 1)
    low = raw.lower()  # ASCII only, which is all the word lists need
    user_words = _words(low)
    if system_head:
        system_low = system_head.encode("utf-8", "replace").lower()
        low_all = low + b"\n" + system_low
        words = user_words | _words(system_low)
    else:
        low_all, words = low, user_words
    multiline = b"\n" in raw
    non_ascii = 0.0 if len(raw) == len(sample) else 1.0 - len(sample.encode("ascii", "ignore")) / len(sample)
    english = len(user_words & _ENGLISH_WORDS) >= 2
    other_language = not english and non_ascii < 0.3 and len(user_words & OTHER_LANGUAGE_WORDS) >= 2
    other_script = non_ascii >= _OTHER_LANGUAGE_SCRIPT
    cjk = len(raw) - len(raw.translate(None, CJK_LEADS)) if non_ascii else 0
    scale = 1.0 + (CJK_CHAR_WEIGHT - 1.0) * cjk / len(sample) if cjk else 1.0

    digits = len(raw) - len(raw.translate(None, _DIGITS))
    runs = set(raw.translate(_ONLY_DIGITS).split()) if digits else set()
    numbers = len(runs)
    counts = [  # in `languages.CUE_KINDS` order
        len(words & _REASONING_WORDS) + _phrases(_REASONING_PHRASES, words, low_all),
        len(words & _EXPERT_WORDS) + _phrases(_EXPERT_PHRASES, words, low_all),
        len(words & _ROUTINE_WORDS),
        len(words & _SEQUENCE_WORDS),
        len(words & _CONDITIONAL_WORDS),
        len(words & _QUANTITY_WORDS),
        len(words & _CONSTRAINT_WORDS)
        + sum(low_all.count(phrase) for key, phrase in _CONSTRAINT_PHRASES if key in words),
    ]
    # Not evidently English (a short request may name too few function words to tell its language
    # by): the same cues in the other languages too. None of their words is an English one.
    if not english or other_script:
        counts = [mine + theirs for mine, theirs in zip(counts, foreign_cues(sample, cjk > 0), strict=True)]
    reasoning, expert, routine, sequence, conditionals, quantities, constraints = counts
    lines = b"\n" + raw if multiline else b""
    stops = raw.translate(_ENDS_TO_STOP)
    no_capitals = raw.translate(None, _CAPITALS)
    capitals = len(raw) - len(no_capitals)
    letters = capitals + len(no_capitals) - len(no_capitals.translate(None, _LOWERCASE))
    cues = [
        math.log1p(raw.count(b"```") // 2),
        (len(raw) - len(raw.translate(None, _CODE_SYMBOLS))) / size,
        float(len(words & _CODE_WORDS)),
        math.log1p(
            len(raw) - len(raw.translate(None, _MATH_SYMBOLS)) + raw.count(b" = ") + raw.count(b" + ")
        ),
        digits / size,
        math.log1p(numbers),
        float(min(max(map(len, runs), default=0), 12)),
        float(reasoning),
        float(expert),
        float(routine),
        math.log1p(len(_LIST_ITEM.findall(lines)) + sequence),
        float(conditionals),
        float(quantities),
        math.log1p(constraints),
        float(sum(1 for w in _NEGATIONS if w in raw)),
        math.log1p(raw.count(b"?")),
        1.0 if len({m.lower() for m in _OPTION.findall(lines)}) >= 3 else 0.0,
        math.log1p(stops.count(b". ") + stops.count(b".\n") + (1 if raw else 0)),
        math.log1p(raw.count(b",") + raw.count(b";")),
        # 20 pseudo-letters at a typical 5% keep short and non-Latin prompts near the middle.
        _TYPICAL_CAPITALS if other_language or other_script else (capitals + 1.0) / (letters + 20.0),
        non_ascii,
        1.0 if other_language else 0.0,  # Latin script only: other scripts are `non_ascii`'s
    ]
    return cues, user_words, scale


def _words(low: bytes) -> set[bytes]:
    """The distinct punctuation-split words of lower-cased bytes."""
    return set(low.translate(_TO_SPACE).split())


def _phrases(table: tuple[tuple[bytes, bytes], ...], words: set[bytes], text: bytes) -> int:
    """How many of the table's phrases occur, each looked for only when its key word does."""
    return sum(1 for key, phrase in table if key in words and phrase in text)


def _log_tokens(chars: int) -> float:
    return math.log1p(chars / _CHARS_PER_TOKEN)


def _structured_output(response_format: Any) -> float:
    if not isinstance(response_format, dict):
        return 0.0
    kind = response_format.get("type")
    if kind == "json_schema":
        return 1.0
    return 0.5 if kind == "json_object" else 0.0


def _long_output(body: dict[str, Any]) -> float:
    limit = body.get("max_completion_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = body.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 1024:
        return 0.0
    return min(math.log2(limit / 1024), 6.0)


def _reasoning_effort(effort: Any) -> float:
    return _EFFORT.get(effort, 0.0) if isinstance(effort, str) else 0.0
