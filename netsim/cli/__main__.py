"""``python -m netsim.cli``: the ``netsim`` command."""

from netsim.cli import main

main()
