"""Writes the test fixtures' packets into a fuzzing corpus directory.

dns: every DNS payload (hex dumps, UDP payloads of the lab pcaps); frames: every Ethernet frame.
"""
import pathlib
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


fixtures = list((root / "Tests").glob("*/Fixtures/*"))
samples = []
for path in fixtures:
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
for index, sample in enumerate(samples):
    (corpus / f"seed-{index:04d}").write_bytes(sample)
