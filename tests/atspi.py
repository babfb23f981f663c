#!/usr/bin/python3
"""Reads and drives a running app's window over AT-SPI, as a screen reader does.

Used by tests/app_first_run.rs on the real binary: egui publishes every widget through
AccessKit, so a widget is found by its accessible name, never by a position on screen.
Runs with Debian's python3 (python3-pyatspi); one command per call, no waiting here (the
caller polls with its own deadline).

usage: atspi.py APP names           every node of APP's window: "role<TAB>name" per line
       atspi.py APP click NAME      the node named exactly NAME: its first action (a click)
       atspi.py APP focus NAME      keyboard focus to the node named exactly NAME
       atspi.py APP where NAME      the centre of the node named exactly NAME that takes
                                    input, in screen pixels: "X Y"
       atspi.py APP set NAME TEXT   replaces what the entry named exactly NAME holds with TEXT
       atspi.py APP text NAME       the text the node named exactly NAME holds (an entry)
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


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    app = app_named(argv[1])
    if app is None:
        return 3
    command = argv[2]
    if command == "names":
        for node in walk(app):
            print(f"{node.getRoleName()}\t{node.name}")
        return 0
    if command == "where" and len(argv) == 4:
        for node in walk(app):
            if node.name != argv[3] or node.getRoleName() == "label":
                continue
            box = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
            if box.width > 0 and box.height > 0:
                print(box.x + box.width // 2, box.y + box.height // 2)
                return 0
        return 3
    if command == "set" and len(argv) == 5:
        for node in walk(app):
            if node.name != argv[3]:
                continue
            try:
                editable = node.queryEditableText()
            except NotImplementedError:
                continue
            if editable.setTextContents(argv[4]):
                return 0
        return 3
    if command == "text" and len(argv) == 4:
        for node in walk(app):
            if node.name != argv[3]:
                continue
            try:
                text = node.queryText()
            except NotImplementedError:
                continue
            print(text.getText(0, text.characterCount))
            return 0
        return 3
    if command in ("click", "focus") and len(argv) == 4:
        for node in walk(app):
            if node.name != argv[3]:
                continue
            if command == "focus":
                if node.queryComponent().grabFocus():
                    return 0
                continue
            try:
                action = node.queryAction()
            except NotImplementedError:
                continue
            if action.nActions > 0 and action.doAction(0):
                return 0
        return 3
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
