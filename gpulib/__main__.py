from gpulib.cli import main

raise SystemExit(main())
