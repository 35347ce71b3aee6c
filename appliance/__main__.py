from .edges.cli import main

main()
