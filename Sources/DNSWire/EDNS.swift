public import NetworkAddresses

/// The EDNS0 Update Lease option (option code 2, RFC 9664).
public struct UpdateLease: Hashable, Sendable {
    /// Requested or granted lease for the records, in seconds.
    public var lease: UInt32
    /// The KEY-LEASE of the 8-byte form; nil for the 4-byte form that Macs send.
    public var keyLease: UInt32?

    public init(lease: UInt32, keyLease: UInt32? = nil) {
        self.lease = lease
        self.keyLease = keyLease
    }

    public static let optionCode: UInt16 = 2
}

/// The EDNS0 OWNER option (option code 4, draft-cheshire-edns0-owner-option), the identity of a sleeping host.
///
/// Valid option lengths are 8 (no wake MAC), 14 (wake MAC), 18 and 20 (wake MAC and a 4- or 6-byte SecureOn
/// password); the length counts the option data only.
public struct OwnerOption: Hashable, Sendable {
    /// Must be 0 for the option to be honoured; kept as received.
    public var version: UInt8
    /// The host's sleep/wake epoch; compare for inequality only, it wraps.
    public var sequence: UInt8
    /// The host's identity ("H-MAC"), not necessarily the MAC of any interface that sends.
    public var primaryMAC: MACAddress
    /// The MAC of the interface to wake ("I-MAC"); nil when the option was sent in its 8-byte form.
    public var wakeMAC: MACAddress?
    /// A SecureOn password of 4 or 6 bytes; needs `wakeMAC`.
    public var password: [UInt8]?

    public init(
        version: UInt8 = 0, sequence: UInt8, primaryMAC: MACAddress, wakeMAC: MACAddress? = nil,
        password: [UInt8]? = nil
    ) {
        self.version = version
        self.sequence = sequence
        self.primaryMAC = primaryMAC
        self.wakeMAC = wakeMAC
        self.password = password
    }

    public static let optionCode: UInt16 = 4

    /// The MAC to put in magic packets: the wake MAC, or the primary MAC when none was sent.
    public var effectiveWakeMAC: MACAddress { wakeMAC ?? primaryMAC }

    /// The option data length this value encodes to.
    public var encodedLength: Int {
        guard wakeMAC != nil else { return 8 }
        return 14 + (password?.count ?? 0)
    }
}

/// One option of an OPT record, in the order received.
public enum EDNSOption: Hashable, Sendable {
    case updateLease(UpdateLease)
    case owner(OwnerOption)
    /// Any other option, its data kept as bytes.
    case other(code: UInt16, data: [UInt8])

    public var code: UInt16 {
        switch self {
        case .updateLease: UpdateLease.optionCode
        case .owner: OwnerOption.optionCode
        case .other(let code, _): code
        }
    }
}

/// The RDATA of an OPT pseudo-record: its options, in order.
public struct OPTData: Hashable, Sendable {
    public var options: [EDNSOption]

    public init(options: [EDNSOption]) { self.options = options }

    /// The first OWNER option, if any.
    public var owner: OwnerOption? {
        for case .owner(let owner) in options { return owner }
        return nil
    }

    /// The first Update Lease option, if any.
    public var updateLease: UpdateLease? {
        for case .updateLease(let lease) in options { return lease }
        return nil
    }
}

/// A typed view of an OPT pseudo-record's header fields (RFC 6891): the CLASS is the sender's UDP payload size and
/// the TTL holds the extended RCODE, the EDNS version and the flags. Apple puts 0x1194 (4500) in the TTL field, so
/// the Z bits are commonly non-zero and must be kept, not rejected.
public struct EDNSHeader: Hashable, Sendable {
    public var udpPayloadSize: UInt16
    public var extendedResponseCode: UInt8
    public var version: UInt8
    /// The 16 flag bits: DO is the top bit, the rest is Z.
    public var flags: UInt16

    public init(udpPayloadSize: UInt16, extendedResponseCode: UInt8 = 0, version: UInt8 = 0, flags: UInt16 = 0) {
        self.udpPayloadSize = udpPayloadSize
        self.extendedResponseCode = extendedResponseCode
        self.version = version
        self.flags = flags
    }

    public var dnssecOK: Bool { flags & 0x8000 != 0 }

    /// The TTL field this header encodes to.
    public var ttlField: UInt32 {
        UInt32(extendedResponseCode) << 24 | UInt32(version) << 16 | UInt32(flags)
    }

    init(udpPayloadSize: UInt16, ttlField: UInt32) {
        self.udpPayloadSize = udpPayloadSize
        extendedResponseCode = UInt8(truncatingIfNeeded: ttlField >> 24)
        version = UInt8(truncatingIfNeeded: ttlField >> 16)
        flags = UInt16(truncatingIfNeeded: ttlField)
    }
}
