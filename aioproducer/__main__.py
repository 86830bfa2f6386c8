"""`python -m aioproducer`: the command line (see `aioproducer.cli`)."""

from aioproducer.cli import main

raise SystemExit(main())
