"""python -m kolla_salt.cli"""
import sys

from . import main

sys.exit(main())
