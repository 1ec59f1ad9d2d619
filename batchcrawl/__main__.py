"""``python -m batchcrawl ...``: the ``batchcrawl`` command (:func:`batchcrawl.cli.main`), for a
checkout used without installing its console script (``PYTHONPATH=<checkout>``)."""

if __name__ == "__main__":  # not when a spawned Dask worker imports the parent's main module
    from batchcrawl.console.early import exit_before_start

    exit_before_start()  # first: a stop while the rest is imported is one line (cli.py)
    from batchcrawl.cli import main

    main(prog_name="batchcrawl")
