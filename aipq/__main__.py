"""``python -m aipq …`` runs the command line, as ``aipq …`` does."""

from aipq.cli.main import main

main()
