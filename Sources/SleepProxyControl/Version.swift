import CBuildInfo

/// The release of sleepproxy this build belongs to: what `sleepproxyd --version` and `sleepproxyctl --version`
/// print.
public enum SleepProxyVersion {
    /// The version of the sources. The first line of `debian/changelog` names the same upstream version (a test
    /// checks that they agree).
    public static let release = "0.3.0"

    /// The version of the Debian package this build went into (`0.3.0-1`), set by the package build through
    /// `SLEEPPROXY_PACKAGE_VERSION`; nil for a build from source.
    public static let package: String? = {
        let text = String(cString: sp_package_version())
        return text.isEmpty ? nil : text
    }()

    /// What the programs call themselves: the package's version in a package, else the release.
    public static var string: String { package ?? release }
}
