#!/usr/bin/env python3
"""Validate Realtime API events in fake-provider dumps against the official `openai` models.

Usage: scripts/validate-realtime-events.py [-q] DUMP.jsonl...
       scripts/validate-realtime-events.py --serve

`--serve` (for test harnesses, to import openai once) reads one dump path per line on stdin
and answers each with one JSON line on stdout: {"path", "ok", "report"}.

A dump is the JSONL written by `persyk fake-provider --dump` (or `FakeLog::to_jsonl`): lines
with `"from": "server"` carry an event the fake sent, `"from": "client"` one it received,
`"from": "fake"` its own notes (skipped). Each event is checked against

  * server events: `openai.types.realtime.RealtimeServerEvent`
  * client events: `openai.types.realtime.RealtimeClientEvent`

Strictness (in this order, all must pass):
  1. The `type` must name a member of the union (discriminated by its `type` Literal);
     `fake.*` types are skipped and counted, any other unknown type is an error.
  2. The member model validates the event in pydantic strict mode from JSON (required fields
     present, no type coercion: "5" is not an int, 5 is not a str).
  3. `pydantic.TypeAdapter(<union>)` resolves the event to that same member.
  4. No unknown fields at any depth (the SDK models allow extras, so this is checked by
     walking the validated model), except documented service fields the SDK does not model:
     `session.id`, `session.object`, `session.expires_at` on session.created/updated, and the
     planted `session.client_secret` on session.created (counted separately).
  5. Server `event_id`s are unique per connection; base64 audio decodes (and is whole PCM16
     samples unless the dump truncated it); a client line that is not a JSON object is an
     error.
  6. Per-model rules of a client `session.update` (transcription or realtime) that the SDK
     does not enforce (MODEL_RULES):
     - `gpt-live-transcribe` and `gpt-realtime-whisper` support no turn detection:
       `audio.input.turn_detection` must be present and null (omitted may fall back to VAD);
     - no `prompt` with `gpt-realtime-whisper`; `delay` only with `gpt-realtime-whisper`;
     - never both `language` and `languages`;
     - `keywords` only with `gpt-transcribe` and `gpt-live-transcribe`, each a non-empty
       string without `<`, `>`, CR or LF.

Exit status: 0 all valid, 1 an invalid event (each reported as FILE:LINE), 2 cannot run
(openai not installed: run scripts/setup-python; unreadable file).
"""

import base64
import binascii
import json
import sys
import typing

try:
    import pydantic
    import openai
    from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent
except ImportError as exc:  # pragma: no cover
    print(f"validate-realtime-events: {exc}; run scripts/setup-python", file=sys.stderr)
    sys.exit(2)

# Fields the GA service sends that the SDK models do not declare (allowed extras), by event
# type and path inside the event.
ALLOWED_EXTRAS = {
    ("session.created", "session"): {"id", "object", "expires_at"},
    ("session.updated", "session"): {"id", "object", "expires_at"},
}
# Extras a scenario plants on purpose (to test the client's sanitizer): allowed, but counted.
PLANTED_EXTRAS = {
    ("session.created", "session"): {"client_secret"},
}
# Per-model rules (6): which transcription models take what.
NO_TURN_DETECTION = {"gpt-live-transcribe", "gpt-realtime-whisper"}
KEYWORD_MODELS = {"gpt-transcribe", "gpt-live-transcribe"}
NO_PROMPT = {"gpt-realtime-whisper"}
DELAY_MODELS = {"gpt-realtime-whisper"}


def model_rule_errors(event):
    """Rule 6 for one client `session.update`: a list of messages."""
    session = event.get("session")
    audio_input = ((session or {}).get("audio") or {}).get("input") or {}
    transcription = audio_input.get("transcription")
    if not isinstance(transcription, dict):
        return []
    model = transcription.get("model")
    out = []
    if model in NO_TURN_DETECTION:
        if "turn_detection" not in audio_input:
            out.append(f"{model}: audio.input.turn_detection must be sent as null (omitted may mean server VAD)")
        elif audio_input["turn_detection"] is not None:
            out.append(f"{model}: supports no turn detection, but turn_detection is not null")
    if model in NO_PROMPT and transcription.get("prompt") is not None:
        out.append(f"{model}: takes no prompt")
    if transcription.get("delay") is not None and model not in DELAY_MODELS:
        out.append(f"{model}: delay is only documented for {', '.join(sorted(DELAY_MODELS))}")
    if transcription.get("language") is not None and transcription.get("languages") is not None:
        out.append("language and languages must not both be set")
    keywords = transcription.get("keywords")
    if keywords is not None:
        if model not in KEYWORD_MODELS:
            out.append(f"{model}: takes no keywords")
        for i, word in enumerate(keywords if isinstance(keywords, list) else [keywords]):
            if not isinstance(word, str) or not word or any(c in word for c in "<>\r\n"):
                out.append(f"keywords[{i}]: must be a non-empty line without '<' or '>'")
    return out


AUDIO_FIELDS = {"input_audio_buffer.append": "audio", "response.output_audio.delta": "delta"}


def members(union):
    """The models of an `Annotated[Union[...], PropertyInfo(discriminator="type")]`."""
    inner = typing.get_args(union)[0] if typing.get_origin(union) is typing.Annotated else union
    by_type = {}
    for model in typing.get_args(inner):
        literal = model.model_fields["type"].annotation
        for value in typing.get_args(literal):
            by_type[value] = model
    return by_type


SIDES = {
    "server": (members(RealtimeServerEvent), pydantic.TypeAdapter(RealtimeServerEvent)),
    "client": (members(RealtimeClientEvent), pydantic.TypeAdapter(RealtimeClientEvent)),
}


def unknown_fields(value, path, out):
    """Collects (path, field) of every extra field in a validated model tree."""
    if isinstance(value, pydantic.BaseModel):
        for key in (value.__pydantic_extra__ or {}):
            out.append((path, key))
        for name in type(value).model_fields:
            unknown_fields(getattr(value, name), f"{path}.{name}" if path else name, out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            unknown_fields(item, f"{path}[{i}]", out)
    elif isinstance(value, dict):
        for key, item in value.items():
            unknown_fields(item, f"{path}.{key}" if path else key, out)


class Report:
    def __init__(self):
        self.errors = []
        self.validated = {"server": 0, "client": 0}
        self.types = {}
        self.skipped_fake = 0
        self.other_lines = 0
        self.planted = 0
        self.allowed_extras = 0

    def error(self, where, message):
        self.errors.append(f"{where}: {message}")


def check_event(report, where, side, event, truncated, event_ids):
    by_type, adapter = SIDES[side]
    kind = event.get("type")
    if not isinstance(kind, str):
        report.error(where, f"{side} event without a string type")
        return
    if kind.startswith("fake."):
        report.skipped_fake += 1
        return
    model = by_type.get(kind)
    if model is None:
        report.error(where, f"{side} event type {kind!r} is not in the {side} event union")
        return
    try:
        parsed = model.model_validate_json(json.dumps(event), strict=True)
    except pydantic.ValidationError as exc:
        lines = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<event>'}: {e['msg']}" for e in exc.errors()
        )
        report.error(where, f"{kind} ({model.__name__}): {lines}")
        return
    try:
        via_union = adapter.validate_python(event)
    except pydantic.ValidationError as exc:
        report.error(where, f"{kind}: the {side} union rejects it ({exc.error_count()} errors)")
        return
    if type(via_union) is not model:
        report.error(where, f"{kind}: the union resolves to {type(via_union).__name__}")
        return
    errors_before = len(report.errors)
    extras = []
    unknown_fields(parsed, "", extras)
    for path, key in extras:
        if key in ALLOWED_EXTRAS.get((kind, path), ()):
            report.allowed_extras += 1
        elif key in PLANTED_EXTRAS.get((kind, path), ()):
            report.planted += 1
        else:
            report.error(where, f"{kind}: unknown field {path + '.' if path else ''}{key}")
    if side == "client" and kind == "session.update":
        for message in model_rule_errors(event):
            report.error(where, f"session.update: {message}")
    if side == "server":
        if event["event_id"] in event_ids:
            report.error(where, f"{kind}: duplicate event_id {event['event_id']}")
        event_ids.add(event["event_id"])
    field = AUDIO_FIELDS.get(kind)
    if field is not None:
        try:
            audio = base64.b64decode(event[field], validate=True)
        except (binascii.Error, ValueError) as exc:
            report.error(where, f"{kind}: {field} is not base64: {exc}")
            return
        if not truncated and len(audio) % 2:
            report.error(where, f"{kind}: {field} is not whole PCM16 samples ({len(audio)} bytes)")
    if len(report.errors) > errors_before:
        return
    report.validated[side] += 1
    report.types[(side, kind)] = report.types.get((side, kind), 0) + 1


def validate_file(path, report):
    event_ids = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            where = f"{path}:{number}"
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                report.error(where, f"not JSON: {exc}")
                continue
            origin = entry.get("from")
            if "event" in entry and origin in SIDES:
                if not isinstance(entry["event"], dict):
                    report.error(where, f"{origin} event is not an object")
                    continue
                ids = event_ids.setdefault(entry.get("conn"), set())
                check_event(report, where, origin, entry["event"], "truncated" in entry, ids)
            elif origin == "client" and "invalid" in entry:
                report.error(where, f"client sent a frame that is not a JSON object: {entry.get('error')}")
            else:
                report.other_lines += 1


def render(report, quiet):
    out = list(report.errors[:50])
    if len(report.errors) > 50:
        out.append(f"... and {len(report.errors) - 50} more")
    if not quiet or report.errors:
        out.append(
            f"validate-realtime-events: openai {openai.__version__}, pydantic {pydantic.VERSION}: "
            f"{report.validated['server']} server and {report.validated['client']} client events "
            f"valid (strict, no unknown fields), {report.skipped_fake} fake.* skipped, "
            f"{report.allowed_extras} allowed service extras, {report.planted} planted extras, "
            f"{report.other_lines} other lines, {len(report.errors)} errors"
        )
        if not quiet:
            for (side, kind), count in sorted(report.types.items()):
                out.append(f"  {side:6} {kind}: {count}")
    return "\n".join(out)


def serve():
    for line in sys.stdin:
        path = line.rstrip("\n")
        if not path:
            continue
        report = Report()
        try:
            validate_file(path, report)
            answer = {"path": path, "ok": not report.errors, "report": render(report, False)}
        except OSError as exc:
            answer = {"path": path, "ok": False, "report": f"cannot read: {exc}"}
        print(json.dumps(answer), flush=True)
    return 0


def main(argv):
    if argv == ["--serve"]:
        return serve()
    quiet = "-q" in argv
    paths = [a for a in argv if a != "-q"]
    if not paths:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    report = Report()
    for path in paths:
        try:
            validate_file(path, report)
        except OSError as exc:
            print(f"validate-realtime-events: {path}: {exc}", file=sys.stderr)
            return 2
    text = render(report, quiet)
    if text:
        print(text)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
