"""``python -m gateway.cli``: the ``lastmile`` command."""

from gateway.cli import main

main()
