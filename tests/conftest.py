"""pytest configuration for the suite: the plugin through which test modules name the extra they
need (:mod:`extras`)."""
pytest_plugins = ["extras"]
