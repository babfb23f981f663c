#!/usr/bin/env python3
"""The app a user dictates into, for tests/app_paste.rs: a Tk window with one entry that
has keyboard focus (X input focus, set with focus_force).

Prints "ready" once the entry has focus, then answers one JSON line per command read from
stdin:
  entry              -> {"entry": <the entry's text>, "focus": <whether the entry has focus>}
  clipboard          -> {"clipboard": <CLIPBOARD as text, or null when it holds none>}
  set-clipboard TEXT -> {"ok": true} (Tk then owns CLIPBOARD with TEXT)
On end of input or SIGTERM it prints the entry's final state the same way and exits.
"""

import json
import queue
import signal
import sys
import threading
import tkinter as tk

root = tk.Tk()
root.title("Persyk paste target")
root.geometry("420x60+40+40")
entry = tk.Entry(root, width=50)
entry.pack(padx=8, pady=8)
commands = queue.Queue()


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def state():
    return {"entry": entry.get(), "focus": root.focus_get() is entry}


def finish(*_):
    say(state())
    root.destroy()


def read_stdin():
    for line in sys.stdin:
        commands.put(line.rstrip("\n"))
    commands.put(None)


def poll():
    while True:
        try:
            line = commands.get_nowait()
        except queue.Empty:
            break
        if line is None:
            finish()
            return
        if line == "entry":
            say(state())
        elif line == "clipboard":
            try:
                say({"clipboard": root.clipboard_get()})
            except tk.TclError:
                say({"clipboard": None})
        elif line.startswith("set-clipboard "):
            root.clipboard_clear()
            root.clipboard_append(line[len("set-clipboard "):])
            root.update()
            say({"ok": True})
        else:
            say({"error": "unknown command"})
    root.after(20, poll)


def wait_for_focus():
    entry.focus_force()
    root.update()
    if root.focus_get() is entry:
        say("ready")
        root.after(20, poll)
    else:
        root.after(50, wait_for_focus)


signal.signal(signal.SIGTERM, lambda *_: root.after(0, finish))
threading.Thread(target=read_stdin, daemon=True).start()
root.after(0, wait_for_focus)
root.mainloop()
