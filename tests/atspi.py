#!/usr/bin/python3
"""Reads and drives a running app's window over AT-SPI, as a screen reader does.

Used by tests/app_first_run.rs on the real binary: egui publishes every widget through
AccessKit, so a widget is found by its accessible name, never by a position on screen.
Runs with Debian's python3 (python3-pyatspi); one command per call, no waiting here (the
caller polls with its own deadline).

usage: atspi.py APP names           every node of APP's window: "role<TAB>name" per line
       atspi.py APP click NAME      the node named exactly NAME: its first action (a click)
       atspi.py APP set NAME TEXT   replaces what the entry named exactly NAME holds with TEXT
exit: 0 done, 3 the app or the node is not there (yet)
"""
import sys

import pyatspi


def app_named(name):
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and app.name == name:
            return app
    return None


def walk(node, depth=0):
    yield node
    if depth > 40:
        return
    for i in range(node.childCount):
        child = node.getChildAtIndex(i)
        if child is not None:
            yield from walk(child, depth + 1)


def offering(app, name, query):
    """Each interface `query` returns for the nodes named exactly `name` that have it."""
    for node in walk(app):
        if node.name != name:
            continue
        try:
            yield query(node)
        except NotImplementedError:
            continue


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    app = app_named(argv[1])
    if app is None:
        return 3
    command = argv[2]
    if command == "names" and len(argv) == 3:
        for node in walk(app):
            print(f"{node.getRoleName()}\t{node.name}")
        return 0
    if command == "click" and len(argv) == 4:
        for action in offering(app, argv[3], lambda n: n.queryAction()):
            if action.nActions > 0 and action.doAction(0):
                return 0
        return 3
    if command == "set" and len(argv) == 5:
        for editable in offering(app, argv[3], lambda n: n.queryEditableText()):
            if editable.setTextContents(argv[4]):
                return 0
        return 3
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
