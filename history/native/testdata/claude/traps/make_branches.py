#!/usr/bin/env python3
"""Writes the branch and glued-record traps in this folder (synthetic; shapes from
Claude Code bug reports of 2026, see ../../SOURCES.md). Run from this folder."""
import json

SID = "33333333-3333-4333-8333-333333333333"


def line(kind, uuid, parent, ts, message=None, **extra):
    d = {"isSidechain": False, "userType": "external", "cwd": "/w/app", "sessionId": SID, "version": "2.1.140",
         "gitBranch": "main", "type": kind, "uuid": uuid, "parentUuid": parent, "timestamp": ts}
    if message is not None:
        d["message"] = message
    d.update(extra)
    return json.dumps(d)


def prompt(text):
    return {"role": "user", "content": text}


def asst(mid, *blocks):
    return {"id": mid, "type": "message", "role": "assistant", "model": "claude-opus-4-6", "content": list(blocks),
            "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


def tool_use(tid, name, inp):
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def result(tid, text, err=False):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": err}]}


def write_tur(path, content):
    return {"type": "create", "filePath": path, "content": content, "structuredPatch": []}


def parallel(done):
    # two parallel Writes chained a1 -> a2; the result of the first hangs off a1
    # (a side branch), the turn continues from the second's result
    out = [
        line("user", "u1", None, "2026-03-01T10:00:00.000Z", prompt("Write a.txt and b.txt")),
        line("assistant", "a1", "u1", "2026-03-01T10:00:01.000Z",
             asst("msg_1", tool_use("toolu_a", "Write", {"file_path": "/w/app/a.txt", "content": "a\n"}))),
        line("assistant", "a2", "a1", "2026-03-01T10:00:01.100Z",
             asst("msg_1", tool_use("toolu_b", "Write", {"file_path": "/w/app/b.txt", "content": "b\n"}))),
        line("user", "r2", "a2", "2026-03-01T10:00:02.000Z", result("toolu_b", "File created"),
             toolUseResult=write_tur("/w/app/b.txt", "b\n")),
        line("user", "r1", "a1", "2026-03-01T10:00:02.100Z", result("toolu_a", "File created"),
             toolUseResult=write_tur("/w/app/a.txt", "a\n")),
    ]
    if done:
        out += [
            line("assistant", "a3", "r2", "2026-03-01T10:00:03.000Z", asst("msg_2", {"type": "text", "text": "Both written."})),
            line("user", "u2", "a3", "2026-03-01T10:01:00.000Z", prompt("Thanks")),
            line("assistant", "a4", "u2", "2026-03-01T10:01:01.000Z", asst("msg_3", {"type": "text", "text": "You're welcome."})),
        ]
    return out


def stale():
    # the newest line (by time and position) answers a days-old tool_use again:
    # it hangs off the old branch and must not become the leaf
    return [
        line("user", "u1", None, "2026-03-01T10:00:00.000Z", prompt("Run the build")),
        line("assistant", "a1", "u1", "2026-03-01T10:00:01.000Z", asst("msg_1", tool_use("toolu_1", "Bash", {"command": "make"}))),
        line("user", "r1", "a1", "2026-03-01T10:00:05.000Z", result("toolu_1", "ok")),
        line("assistant", "a2", "r1", "2026-03-01T10:00:06.000Z", asst("msg_2", {"type": "text", "text": "Built."})),
        line("user", "u2", "a2", "2026-03-04T09:00:00.000Z", prompt("Now deploy")),
        line("assistant", "a3", "u2", "2026-03-04T09:00:01.000Z", asst("msg_3", {"type": "text", "text": "Deployed."})),
        line("user", "r1-late", "a1", "2026-03-04T09:05:00.000Z",
             result("toolu_1", "The user doesn't want to proceed with this tool use.", True)),
    ]


def glued():
    # two complete records on one line (a write that lost its newline)
    ls = [
        line("user", "u1", None, "2026-03-01T10:00:00.000Z", prompt("Say hi")),
        line("assistant", "a1", "u1", "2026-03-01T10:00:01.000Z", asst("msg_1", {"type": "text", "text": "hi"})),
        line("user", "u2", "a1", "2026-03-01T10:00:02.000Z", prompt("Again")),
        line("assistant", "a2", "u2", "2026-03-01T10:00:03.000Z", asst("msg_2", {"type": "text", "text": "hi again"})),
    ]
    return [ls[0], ls[1] + ls[2], ls[3]]


for k, (name, make) in enumerate([("parallel_side_branch.jsonl", lambda: parallel(True)),
                                  ("parallel_running.jsonl", lambda: parallel(False)),
                                  ("stale_branch_last.jsonl", stale), ("glued_records.jsonl", glued)]):
    SID = "3333333%d-3333-4333-8333-333333333333" % k
    ls = make()
    with open(name, "w") as f:
        f.write("\n".join(ls) + "\n")
