import DNSWire
import Foundation
import Frames
import NetworkAddresses
import Synchronization

/// The address records of soak hosts that the proxy put on the wire, as the waker heard them: multicast answers,
/// unicast answers to QU and unicast-assist questions, and legacy replies. Kept for the last ten seconds, by host.
final class SoakAnswersHeard: Sendable {
    struct Heard: Sendable {
        let time: Duration
        let address: IPv4Address
        let multicast: Bool
    }

    private let heard = Mutex<[Int: [Heard]]>([:])

    func add(_ index: Int, _ entry: Heard) {
        heard.withLock { heard in
            var list = heard[index, default: []]
            list.removeAll { entry.time - $0.time > .seconds(10) }
            list.append(entry)
            heard[index] = list
        }
    }

    /// The first answer for host `index` sent to the waker alone (a legacy reply) heard at or after `since`.
    func firstUnicast(_ index: Int, since: Duration) -> Heard? {
        heard.withLock { heard in heard[index]?.first { !$0.multicast && $0.time >= since } }
    }

    /// The first answer for host `index` heard at or after `since`; a multicast one heard at or after
    /// `multicastSince` counts too (a responder multicasts a record at most once a second, RFC 6762 section 6).
    func first(_ index: Int, since: Duration, multicastSince: Duration? = nil) -> Heard? {
        heard.withLock { heard in
            heard[index]?.first { entry in
                entry.time >= since || (entry.multicast && multicastSince.map { entry.time >= $0 } == true)
            }
        }
    }
}

/// Frames of the soak's mDNS conversation with the proxy, built and read.
enum SoakWire {
    /// The host name of `NAME.local`, lower-case; nil for any other name.
    static func hostName(_ name: DNSName) -> String? {
        guard name.labelCount == 2, let first = name.label(at: 0), let second = name.label(at: 1),
            String(decoding: second, as: UTF8.self).lowercased() == "local"
        else { return nil }
        return String(decoding: first, as: UTF8.self).lowercased()
    }

    /// N, of a host name `PREFIXN` (`soak12`, `decl0`).
    static func index(_ name: String, prefix: String) -> Int? {
        guard name.hasPrefix(prefix), let index = Int(name.dropFirst(prefix.count)),
            String(index) == name.dropFirst(prefix.count)
        else { return nil }
        return index
    }

    /// The address records of `NAME.local` names with a TTL above zero in an mDNS response from `proxy`'s MAC
    /// (answers and additionals), by host name, and whether it went to the group; nil for any other frame.
    static func answers(in frame: EthernetFrame, from proxy: MACAddress) -> (
        multicast: Bool, records: [(name: String, address: IPv4Address)]
    )? {
        guard frame.header.source == proxy, let ip = frame.ipv4, let udp = frame.udp, udp.sourcePort == 5353,
            let message = try? DNSMessage(decoding: udp.payload), message.flags.isResponse
        else { return nil }
        var records: [(name: String, address: IPv4Address)] = []
        for record in message.answers + message.additionals where record.ttl > 0 {
            if case .a(let address) = record.rdata, let name = hostName(record.name) {
                records.append((name, address))
            }
        }
        return (ip.header.destination == multicastGroup, records)
    }

    static let multicastGroup = IPv4Address(bytes: [224, 0, 0, 251])!
    static let multicastMAC = MACAddress(bytes: [0x01, 0x00, 0x5E, 0x00, 0x00, 0xFB])!

    /// How a full mDNS querier (from port 5353) asks: a multicast question (QM), a multicast question asking for
    /// a unicast answer (QU), or a question sent straight to the responder's address, as mDNSResponder's unicast
    /// assist asks the host it last heard a record from.
    enum Asking: String, Sendable, CaseIterable {
        case multicast, unicastResponse, unicastAssist
    }

    /// A question for `name`'s A record from `source` (MAC and address) at port 5353, asked as `asking` of the
    /// proxy at `proxy`.
    static func question(
        _ name: DNSName, asking: Asking, source: (mac: MACAddress, address: IPv4Address),
        proxy: (mac: MACAddress, address: IPv4Address)
    ) throws -> [UInt8] {
        let message = DNSMessage(
            id: 0, flags: DNSFlags(response: false, opcode: .query),
            questions: [DNSQuestion(name: name, type: .a, unicastResponse: asking == .unicastResponse)])
        let toProxy = asking == .unicastAssist
        return EthernetFrame.udp(
            UDPDatagram(sourcePort: 5353, destinationPort: 5353, payload: try message.encoded()),
            sourceAddress: source.address, destinationAddress: toProxy ? proxy.address : multicastGroup,
            source: source.mac, destination: toProxy ? proxy.mac : multicastMAC
        ).serialized()
    }
}
