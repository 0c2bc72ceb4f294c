# Prints, as one JSON document on stdout, every thread of the loaded core and every frame
# gdb shows for it, innermost first. Run by the gdb_compare test as
#   gdb -batch -nx -ex 'set pagination off' ... -x frames.py PROGRAM CORE
# The document is framed by two marker lines so gdb's own chatter cannot corrupt it.
import json
import os
import re

import gdb

# A row of `info sharedlibrary`: From, To (absent when gdb could not read the file),
# Syms Read ("Yes", "Yes (*)", "No"), then the library's path.
SOLIB_ROW = re.compile(r"^(?:0x[0-9a-f]+\s+0x[0-9a-f]+\s+)?\s*(?:Yes \(\*\)|Yes|No)\s+(\S.*)$")

FRAME_TYPES = {}
for _name in ("NORMAL_FRAME", "DUMMY_FRAME", "INLINE_FRAME", "TAILCALL_FRAME",
              "SIGTRAMP_FRAME", "ARCH_FRAME", "SENTINEL_FRAME"):
    if hasattr(gdb, _name):
        FRAME_TYPES[getattr(gdb, _name)] = _name[: -len("_FRAME")]


def source_texts(frames, gdb_frames):
    """Adds to each described frame the source line gdb's `frame` command prints for it
    once selected (`LINE<tab>TEXT`), or None where it prints none or cannot read the file
    (it then prints `LINE<tab>in FILE` or an error instead of the text). Run after the
    walk: selecting a frame during it changed what gdb unwound (aarch64 with PAC); and
    `frame N` printed to the terminal rather than into the string."""
    for f, frame in zip(frames, gdb_frames):
        f["source_text"] = None
        if f["line"] is None or not f["fullname"] or not os.path.isfile(f["fullname"]):
            continue
        try:
            frame.select()
            text = gdb.execute("frame", to_string=True)
        except gdb.error:
            continue
        prefix = "%d\t" % f["line"]
        for line in text.splitlines():
            if line.startswith(prefix):
                f["source_text"] = line[len(prefix):]
                break


def describe(frame):
    function = frame.function()
    sal = frame.find_sal()
    symtab = sal.symtab
    return {
        "pc": frame.pc(),
        "name": frame.name(),
        "type": FRAME_TYPES.get(frame.type(), str(frame.type())),
        "function": function.print_name if function is not None else None,
        "file": symtab.filename if symtab is not None else None,
        "fullname": symtab.fullname() if symtab is not None else None,
        "line": sal.line if symtab is not None and sal.line > 0 else None,
    }


def walk_thread(thread):
    thread.switch()
    frames = []
    gdb_frames = []
    stop = None
    error = None
    try:
        frame = gdb.newest_frame()
    except gdb.error as e:
        return frames, None, str(e)
    while frame is not None:
        try:
            frames.append(describe(frame))
            gdb_frames.append(frame)
        except gdb.error as e:
            # e.g. "PC not available": a frame gdb could not unwind to
            error = str(e)
            break
        try:
            older = frame.older()
        except gdb.error as e:
            error = str(e)
            break
        if older is None:
            reason = frame.unwind_stop_reason()
            stop = {
                "code": reason,
                "outermost": reason in (gdb.FRAME_UNWIND_OUTERMOST, gdb.FRAME_UNWIND_NO_REASON),
                "text": gdb.frame_stop_reason_string(reason),
            }
        frame = older
    source_texts(frames, gdb_frames)
    return frames, stop, error


def solibs():
    """The shared libraries gdb lists for the core (the dynamic linker's list)."""
    try:
        text = gdb.execute("info sharedlibrary", to_string=True)
    except gdb.error:
        return []
    out = []
    for line in text.splitlines():
        m = SOLIB_ROW.match(line.strip())
        if m:
            out.append(m.group(1).strip())
    return out


def main():
    inferior = gdb.selected_inferior()
    selected = gdb.selected_thread()
    crashed_lwp = selected.ptid[1] if selected is not None else None
    # Read while the crashed thread is still selected: the siginfo is per thread.
    try:
        signal = int(gdb.parse_and_eval("$_siginfo.si_signo"))
    except gdb.error:
        signal = None
    threads = []
    for thread in sorted(inferior.threads(), key=lambda t: t.num):
        frames, stop, error = walk_thread(thread)
        threads.append({
            "num": thread.num,
            "lwp": thread.ptid[1],
            "frames": frames,
            "stop": stop,
            "error": error,
        })
    print("=== gdb-frames-json ===")
    print(json.dumps({"crashed_lwp": crashed_lwp, "signal": signal, "threads": threads,
                      "solibs": solibs()}))
    print("=== end ===")


main()
