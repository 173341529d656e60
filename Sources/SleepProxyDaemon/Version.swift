/// The release of sleepproxy this build belongs to.
public enum SleepProxyVersion {
    public static let string = "0.1.0-dev"
}
