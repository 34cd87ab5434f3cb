"""Training and evaluating the router from the shared routing data: run from the repository root,
e.g. `python -m training.router.train_router --check`. Needs the `train` extra (numpy, scipy,
scikit-learn); the gateway never imports this package."""
