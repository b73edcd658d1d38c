#!/usr/bin/env python3
"""Decodes a Fleetcast compact batch (the `…/batch` topic, `uplink.encoding: compact`).

A decoder written from the "Compact batch encoding" section of docs/contract.md alone, in another language
than the agent's, for any subscriber to start from. Reads one batch's bytes from the file named
on the command line (or stdin) and prints each event as one line of the contract's JSON, with
its "kind", as the JSON layout of a batch carries it:

    mosquitto_sub -h broker -t 'fleet/+/batch' -C 1 -N > batch.bin
    python3 deploy/decode-compact-batch.py batch.bin

Exit status 0; 1 when the bytes are not a compact batch (it says why on stderr), or when one kind
has more than 30 events within one second of their own time. It checks the layout, not the
values: a subscriber applies the contract's ranges as it does to JSON. Each field's expected
value comes from the previous event of the same kind (fixes and headings are two chains); the
bytes carry no "v" (the layout's version stands for it): each line gets "v":1 as the JSON form.
"""

import datetime
import json
import sys

MAGIC = b"\xfc\x01"
# (key, decimals, moving) in bit order, as the contract lists them.
FIX_FIELDS = [
    ("time", 0, True), ("lat", 9, True), ("lon", 9, True), ("altHAE", 4, False), ("altMSL", 4, False),
    ("geoidSep", 3, False), ("speed", 3, False), ("track", 4, False), ("magvar", 1, False), ("climb", 3, False),
    ("mode", 0, False), ("quality", 0, False), ("sats", 0, False), ("hdop", 2, False), ("vdop", 2, False),
    ("pdop", 2, False), ("eph", 3, False), ("epv", 3, False),
    ("heading", 4, False), ("magHeading", 4, False), ("deviation", 4, False), ("headingSource", 0, False),
]
HEADING_FIELDS = [
    ("time", 0, True), ("heading", 4, False), ("magHeading", 4, False), ("deviation", 4, False),
    ("magvar", 4, False), ("source", 0, False),
]
HEADING_SOURCES = ["HDT", "THS", "HDG", "HDM", "gpsd"]
# More events of one kind than this within one second of their own time: no receiver gives that.
MAXIMUM_PER_SECOND = 30
MASK64 = (1 << 64) - 1


class Malformed(Exception):
    pass


class Reader:
    def __init__(self, data):
        self.data, self.offset = data, 0

    def byte(self):
        if self.offset >= len(self.data):
            raise Malformed("the batch ends too soon")
        self.offset += 1
        return self.data[self.offset - 1]

    def varint(self):
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if b < 0x80:
                if value > MASK64:
                    raise Malformed("a varint is larger than 64 bits")
                return value
            shift += 7
            if shift >= 70:
                raise Malformed("a varint is longer than 10 bytes")


def signed(value):
    """64-bit two's complement of an unsigned 64-bit value."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unzigzag(value):
    return (value >> 1) ^ -(value & 1)


def wrap(value):
    """Arithmetic modulo 2**64, as the encoder's."""
    return signed(value & MASK64)


def iso8601(milliseconds):
    try:
        moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=milliseconds)
    except OverflowError:
        raise Malformed("a time outside the years 1 to 9999")
    return "%04d-" % moment.year + moment.strftime("%m-%dT%H:%M:%S.") + "%03dZ" % (milliseconds % 1000)


def decode(data):
    r = Reader(data)
    if data[:2] != MAGIC:
        raise Malformed("not a compact batch (its first bytes are not FC 01)")
    r.offset = 2
    length = r.byte()
    if not 1 <= length <= 64:
        raise Malformed("the vehicle id is not 1 to 64 bytes")
    try:
        vehicle = bytes(r.byte() for _ in range(length)).decode("ascii")
    except UnicodeDecodeError:
        raise Malformed("the vehicle id is not ASCII")
    run = r.varint()
    count = r.varint()
    if count > 2048:
        raise Malformed("more than 2048 events")
    seq = 0
    # Per kind: each field's last value and, for a moving field, its last step.
    state = {0: ([None] * len(FIX_FIELDS), [0] * len(FIX_FIELDS)), 1: ([None] * len(HEADING_FIELDS), [0] * len(HEADING_FIELDS))}
    events = []
    times = {0: [], 1: []}  # per kind, the times so far (in time order, as agents send them)
    for _ in range(count):
        kind = r.byte()
        if kind not in (0, 1):
            raise Malformed("an event kind other than 0 (fix) and 1 (heading)")
        fields = FIX_FIELDS if kind == 0 else HEADING_FIELDS
        seq = (seq + unzigzag(r.varint())) & MASK64
        changed = r.varint()
        if changed >> len(fields):
            raise Malformed("a changed bit for a field the kind does not have")
        values, steps = state[kind]
        expected = [None if v is None else wrap(v + steps[i]) if fields[i][2] else v for i, v in enumerate(values)]
        new = list(expected)
        for i in range(len(fields)):
            if changed >> i & 1:
                coded = r.varint()
                new[i] = None if coded == 0 else wrap((expected[i] or 0) + unzigzag(coded - 1))
        if new[0] is not None:
            seen = times[kind]
            if seen and new[0] < seen[-1]:
                seen.append(None)  # out of order: the rule is judged no further for this kind
            if None not in seen:
                seen.append(new[0])
                if len(seen) > MAXIMUM_PER_SECOND and new[0] - seen[-1 - MAXIMUM_PER_SECOND] < 1000:
                    raise Malformed("more than %d %s within one second" % (MAXIMUM_PER_SECOND, "fixes" if kind == 0 else "headings"))
        for i in range(len(fields)):
            steps[i] = wrap(new[i] - values[i]) if fields[i][2] and values[i] is not None and new[i] is not None else 0
            values[i] = new[i]
        event = {"kind": "fix" if kind == 0 else "heading", "v": 1, "vehicle": vehicle, "seq": seq}
        if run:
            event["run"] = run
        for (key, decimals, _), value in zip(fields, new):
            if value is None:
                continue
            if key == "time":
                event[key] = iso8601(value)
            elif key in ("source", "headingSource"):
                event[key] = HEADING_SOURCES[value] if 0 <= value < len(HEADING_SOURCES) else "#%d" % value
            elif decimals == 0:
                event[key] = value
            else:
                event[key] = value / 10**decimals
        events.append(event)
    if r.offset != len(data):
        raise Malformed("bytes after the last event")
    return events


def main():
    data = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else sys.stdin.buffer.read()
    try:
        events = decode(data)
    except Malformed as error:
        print("decode-compact-batch: %s" % error, file=sys.stderr)
        return 1
    for event in events:
        print(json.dumps(event, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
