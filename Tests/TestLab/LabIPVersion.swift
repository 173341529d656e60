extension Lab {
    /// IPv4 or IPv6: the transport of an mDNS query, or the protocol avahi saw a record on.
    public enum IPVersion: String, Sendable, Hashable, CaseIterable {
        /// `IPv4`, as avahi prints it.
        case v4 = "IPv4"
        /// `IPv6`, as avahi prints it.
        case v6 = "IPv6"
    }
}
