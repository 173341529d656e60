"""Writes a fuzz target's starting corpus into a directory.

dns: every DNS payload (hex dumps, UDP payloads of the lab pcaps); frames: every Ethernet frame; control: request
lines as sleepproxyctl writes them, and broken ones; keepalive: keepalive RDATA as a Mac writes it, and the broken
records of the parser's tests; config: the sample config file, as shipped and with every key set, and the TOML of
the config tests.
"""
import json
import pathlib
import re
import struct
import sys

root = pathlib.Path(__file__).resolve().parent.parent
target, corpus = sys.argv[1], pathlib.Path(sys.argv[2])


def hex_packets(path):
    packets, current = [], []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        offset = int(fields[0], 16)
        if offset == 0 and current:
            packets.append(bytes(current))
            current = []
        for field in fields[1:]:
            if len(field) != 2:
                break
            current.append(int(field, 16))
    if current:
        packets.append(bytes(current))
    return packets


def pcap_frames(path):
    data = path.read_bytes()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offset, frames = 24, []
    while offset + 16 <= len(data):
        captured = struct.unpack(endian + "I", data[offset + 8:offset + 12])[0]
        frames.append(data[offset + 16:offset + 16 + captured])
        offset += 16 + captured
    return frames


def udp_payload(frame):
    if len(frame) < 14:
        return None
    ethertype = frame[12] << 8 | frame[13]
    if ethertype == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        at = 14 + (frame[14] & 0x0F) * 4
    elif ethertype == 0x86DD and len(frame) >= 62 and frame[20] == 17:
        at = 54
    else:
        return None
    return frame[at + 8:]


def packets():
    samples = []
    for path in (root / "Tests").glob("*/Fixtures/*"):
        if path.suffix == ".hex":
            for packet in hex_packets(path):
                payload = udp_payload(packet)
                samples.append(packet if target == "frames" else (payload or packet))
        elif path.suffix == ".pcap":
            for frame in pcap_frames(path):
                if target == "frames":
                    samples.append(frame)
                elif (payload := udp_payload(frame)) is not None:
                    samples.append(payload)
    return samples


def control_requests():
    """One request per line, as ControlProtocol.line writes them (sorted keys), then lines the daemon refuses."""
    def line(**fields):
        return json.dumps({"version": 1, **fields}, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    valid = [line(command=command) for command in ("status", "hosts", "show", "wake", "forget", "events")]
    valid += [
        line(command="show", host="imac.local"),
        line(command="wake", host="00:11:22:33:44:55"),
        line(command="forget", host="fe80::1"),
        line(command="events", host="imac", limit=5, follow=True),
        line(command="events", limit=0, follow=False),
    ]
    broken = [
        b"\n",
        b"status\n",
        b'{"version":2,"command":"status"}\n',
        b'{"version":1,"command":"reboot"}\n',
        b'{"version":1}\n',
        b'{"version":"1","command":"status"}\n',
        b'{"version":1,"command":"events","limit":-1,"follow":"yes"}\n',
        b'{"version":1,"command":"show","host":"\\u00e9\\ud83d\\ude00"}\n',
        b'{"version":1.5,"command":"status","host":null}\n',
        b'[{"version":1,"command":"status"}]\n',
        b'{"version":1,"command":"status"',
        b'{"version":1,"command":"status","host":"' + b"x" * 16400 + b'"}\n',
    ]
    return valid + broken + [b"".join(valid)]


def keepalive_records():
    """RDATA as KeepaliveRecord.rdata writes it (length byte, text, NUL), and the tests' broken records."""
    ipv4 = ("t=20 i=30 c=10 h=192.168.1.20 d=17.57.144.10 l=60438 r=5223 m=A4:2B:B0:C1:D2:E3 s=1839410022 "
            "a=3304011297 w=2048")
    ipv6 = ("t=20 i=30 c=10 H=fe80::aede:48ff:fe00:1122 D=2001:db8::8a2e:370:7334 l=49152 r=443 "
            "m=A4:2B:B0:C1:D2:E3 s=1839410022 a=3304011297 w=2048")

    def framed(text, nul=True):
        data = text.encode("latin-1")
        return bytes([len(data) + 1]) + data + b"\0" if nul else bytes([len(data)]) + data

    def replacing(key, text, value):
        pairs = [pair if not pair.startswith(key + "=") else (None if value is None else f"{key}={value}")
                 for pair in text.split(" ")]
        return " ".join(pair for pair in pairs if pair is not None)

    texts = [ipv4, ipv6, replacing("H", replacing("D", ipv6, "2001:db8::1"), "::1"),
             "t=4294967295 i=30 c=10 h=255.255.255.254 d=1.0.0.1 l=65535 r=1 m=FF:FE:0A:00:01:0F s=4294967295 a=1 "
             "w=65535"]
    samples = [framed(text) for text in texts] + [framed(ipv4, nul=False)]
    # The tests' Malformed(label, v4: key, value, ...) and v6: cases, and every required key left out.
    tests = (root / "Tests/SleepProxyCoreTests/KeepaliveRecordTests.swift").read_text()
    for family, key, value in re.findall(r'(v4|v6): "(\w)", "((?:[^"\\]|\\.)*)"', tests):
        samples.append(framed(replacing(key, ipv4 if family == "v4" else ipv6, value.replace('\\"', '"'))))
    for key in "thdlrmsaw":
        samples.append(framed(replacing(key, ipv4, None)))
    samples += [
        b"", b"\0", b"\x01\0", b"\x05", framed("t=20\0 i=30"), framed("t=20\ti=30"), bytes([4, 0x74, 0x3D, 0x7F, 0]),
        framed("t=20  i=30"), framed(" " + ipv4), framed("=20 " + ipv4), framed("t=20 z=1 h=192.168.1.20"),
        framed(ipv4 + " H=fe80::1"), framed(ipv6 + " d=17.57.144.10"), framed(ipv4 + " x=1 anything at all"),
        framed(replacing("d", ipv4, None) + " D=2001:db8::1"),
    ]
    return samples


def config_files():
    """The sample file as shipped and with every key set, and the TOML in the config tests' string literals."""
    sample = (root / "Config/sleepproxy.toml").read_text()
    uncommented = re.sub(r"(?m)^# ([a-z_]+ = .*)$", r"\1", sample)
    texts = [sample, uncommented]
    tests = (root / "Tests/SleepProxyDaemonTests/Config/ConfigFileTests.swift").read_text()

    def unescape(literal):
        return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), literal)

    for block in re.finditer(r'"""\n(.*?)\n( *)"""', tests, re.S):
        indent = block.group(2)
        lines = [line[len(indent):] if line.startswith(indent) else line for line in block.group(1).split("\n")]
        texts.append(unescape("\n".join(lines)) + "\n")
    for literal in re.findall(r'(?m)^\s*\(\s*"((?:[^"\\]|\\.)*)"', tests):
        texts.append(unescape(literal) + "\n")
    return [text.encode() for text in texts]


samples = {"dns": packets, "frames": packets, "control": control_requests, "keepalive": keepalive_records,
           "config": config_files}[target]()
for index, sample in enumerate(samples):
    (corpus / f"seed-{index:04d}").write_bytes(sample)
