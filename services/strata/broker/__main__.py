"""``python -m strata.broker --config FILE [--override key=value ...]``: ``strata broker``."""

from strata.cli.main import broker_main

if __name__ == "__main__":
    broker_main()
