#!/usr/bin/env python3
"""The app a user dictates into, for tests/app_paste.rs: a Tk window with one entry that
has keyboard focus (X input focus, set with focus_force).

Prints "ready" once the entry has focus, then answers one JSON line per command read from
stdin:
  entry              -> {"entry": <the entry's text>, "focus": <whether the entry has focus>}
  clipboard          -> {"clipboard": <CLIPBOARD as text, or null when it holds none>}
  set-clipboard TEXT -> {"ok": true} (Tk then owns CLIPBOARD with TEXT)
  set-clipboard-types JSON -> {"ok": true}: Tk owns CLIPBOARD with each {"target": "text"}
                        of the JSON object (e.g. text/html beside STRING)
  clipboard-type T   -> {"clipboard": <CLIPBOARD converted to target T, or null>}
  slow-paste MS      -> {"ok": true}; from now on Ctrl+V in the entry first keeps Tk busy for
                        MS milliseconds (an app slow to handle the paste), then pastes
On end of input or SIGTERM it prints the entry's final state the same way and exits.
"""

import json
import time
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
        elif line.startswith("set-clipboard-types "):
            root.clipboard_clear()
            for target, text in json.loads(line[len("set-clipboard-types "):]).items():
                root.clipboard_append(text, type=target)
            root.update()
            say({"ok": True})
        elif line.startswith("clipboard-type "):
            try:
                say({"clipboard": root.clipboard_get(type=line[len("clipboard-type "):])})
            except tk.TclError:
                say({"clipboard": None})
        elif line.startswith("slow-paste "):
            busy_s = int(line[len("slow-paste "):]) / 1000
            # The instance binding runs before the Entry class's <<Paste>>.
            entry.bind("<Control-v>", lambda _e: time.sleep(busy_s))
            say({"ok": True})
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
