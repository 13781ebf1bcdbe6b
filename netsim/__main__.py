"""``python -m netsim``: the ``netsim`` command."""

from netsim.cli import main

main()
