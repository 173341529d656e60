public import DNSWire

/// A client's registration with a sleep proxy, as a Mac sends it (mDNS.c `SendSPSRegistrationForOwner`;
/// PROTOCOL.md sections 2.2 to 2.6): DNS UPDATE messages with the records in the update section (cache-flush
/// set on unique records, each with its own TTL), no zone section, and one OPT closing each message with the
/// Update-Lease and OWNER options, the same in every message of one registration.
///
/// Each message has its own ID (`id`, then `id + 1`, ...), kept by its retransmissions. Macs since OS X 10.8 give
/// every message of a registration one ID and take any reply with it as an answer for all of them; Macs before
/// gave each its own, as here: the client then knows that every message was answered, not just one.
public struct SleepRegistration: Hashable, Sendable {
    /// DNS data a message may hold after its 12-byte header once it has one record (`NormalMaxDNSMessageData`).
    public static let normalMessageData = 1_440
    /// What a message with a single record may reach (`AbsoluteMaxDNSMessageData`); beyond it a record cannot be
    /// sent at all.
    public static let absoluteMessageData = 8_940
    static let headerSize = 12

    /// The first message's ID, random and not zero.
    public var id: UInt16
    /// The records, `cacheFlush` set on those unique to this host.
    public var records: [DNSRecord]
    /// This host's OWNER: the sequence number of this sleep, the primary MAC, and the MAC to wake if it differs.
    public var owner: OwnerOption
    /// The lease asked for, in seconds (Macs ask for 7200).
    public var lease: UInt32

    public init(id: UInt16, records: [DNSRecord], owner: OwnerOption, lease: UInt32 = 7_200) {
        self.id = id
        self.records = records
        self.owner = owner
        self.lease = lease
    }

    /// The OPT record each message ends with, as Apple writes it: payload size 1440, the TTL field 4500
    /// (`kStandardTTL`), Update-Lease in its 4-byte form, then OWNER.
    public var opt: DNSRecord {
        .opt(
            EDNSHeader(udpPayloadSize: UInt16(Self.normalMessageData), flags: 0x1194),
            options: [.updateLease(UpdateLease(lease: lease)), .owner(owner)])
    }

    /// The messages, in record order: as many records in each as fit in 1,440 bytes of DNS data with the OPT; a
    /// record too large for that goes alone in a message of up to 8,940 bytes. Names are compressed except SRV
    /// targets, as in an update (DNSCommon.c `PutResourceRecordTTLWithLimit`).
    public func datagrams() throws(SleepRegistrationError) -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var pending: [DNSRecord] = []
        var pendingBytes: [UInt8]?
        for record in records {
            let trial = try encoded(pending + [record], id: messageID(datagrams.count))
            if trial.count <= Self.headerSize + Self.normalMessageData {
                pending.append(record)
                pendingBytes = trial
                continue
            }
            if let bytes = pendingBytes { datagrams.append(bytes) }
            let alone = try encoded([record], id: messageID(datagrams.count))
            guard alone.count <= Self.headerSize + Self.absoluteMessageData else {
                throw SleepRegistrationError(
                    "the record \(record.name) \(record.type) makes a message of \(alone.count) bytes, more than the \(Self.headerSize + Self.absoluteMessageData) a registration may have"
                )
            }
            if alone.count > Self.headerSize + Self.normalMessageData {
                datagrams.append(alone)
                pending = []
                pendingBytes = nil
            } else {
                pending = [record]
                pendingBytes = alone
            }
        }
        if let bytes = pendingBytes { datagrams.append(bytes) }
        return datagrams
    }

    /// The ID of message `index`: `id`, then the next ones, never zero.
    public func messageID(_ index: Int) -> UInt16 {
        var value = id
        for _ in 0..<index {
            value &+= 1
            if value == 0 { value = 1 }
        }
        return value
    }

    private func encoded(_ records: [DNSRecord], id: UInt16) throws(SleepRegistrationError) -> [UInt8] {
        do {
            return try DNSMessage(
                id: id, flags: DNSFlags(response: false, opcode: .update), authorities: records, additionals: [opt]
            ).encoded(compression: .exceptSRVTargets)
        } catch {
            throw SleepRegistrationError("cannot encode the registration: \(error)")
        }
    }
}

/// A registration that cannot be sent, and why.
public struct SleepRegistrationError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}
