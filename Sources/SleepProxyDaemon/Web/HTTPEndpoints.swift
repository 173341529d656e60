/// The HTTP listeners a configuration asks for: the metrics endpoint (`metrics.listen`) and the page
/// (`web.listen`), each on its own address, or both from one listener when the addresses are the same.
struct HTTPEndpoints: Equatable, Sendable {
    struct Listener: Equatable, Sendable {
        var address: MetricsAddress
        /// `/metrics` and `/hosts.json`.
        var metrics: Bool
        /// The page, its state and its actions.
        var page: Bool
    }

    var listeners: [Listener]
    /// The token the page's actions need.
    var token: WebToken?

    init(_ configuration: DaemonConfiguration) {
        var listeners: [Listener] = []
        if let address = configuration.metricsListen {
            listeners.append(Listener(address: address, metrics: true, page: configuration.webListen == address))
        }
        if let address = configuration.webListen, address != configuration.metricsListen {
            listeners.append(Listener(address: address, metrics: false, page: true))
        }
        self.listeners = listeners
        token = configuration.webListen == nil ? nil : configuration.webToken
    }

    var isEmpty: Bool { listeners.isEmpty }

    /// What a log line says of the listeners: "metrics on http://127.0.0.1:9187/metrics, the page on ...".
    var summary: String {
        listeners.map { listener in
            switch (listener.metrics, listener.page) {
            case (true, true): "metrics and the page on http://\(listener.address)/"
            case (true, false): "metrics on http://\(listener.address)/metrics"
            default:
                "the page on http://\(listener.address)/ (\(token == nil ? "read-only: no web.token" : "wake and forget with the token"))"
            }
        }.joined(separator: ", ")
    }
}
