import sys

from mllm_classroom.cli import main

sys.exit(main())
