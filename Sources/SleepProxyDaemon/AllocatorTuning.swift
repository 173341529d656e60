import CNetSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps the daemon's resident memory near what it uses, over months.
///
/// glibc's allocator gives a thread that finds the other threads' arenas busy an arena of its own (up to eight per
/// core) and keeps what is freed in each arena for later. The daemon's work hops between Dispatch's worker threads,
/// so over hours its few megabytes of live state spread over several arenas that each keep freed memory: a soak at
/// 300 hosts found four arenas holding 5.4 MB for 2.8 MB in use, and the resident memory rising with every arena
/// added. One arena (the daemon's threads seldom allocate at the same moment), and the free pages given back once a
/// minute, keep it flat.
public enum AllocatorTuning {
    /// The arenas the daemon allows itself unless `MALLOC_ARENA_MAX` says otherwise.
    public static let arenas = 1

    /// Limits the allocator to ``arenas`` arenas, unless the environment sets `MALLOC_ARENA_MAX` (glibc then reads
    /// it itself). Call it before any thread starts. Returns what is in force, for the log.
    public static func limitArenas() -> String {
        if let set = getenv("MALLOC_ARENA_MAX").map({ String(cString: $0) }), !set.isEmpty {
            return "MALLOC_ARENA_MAX=\(set), as set"
        }
        return sp_limit_allocator_arenas(Int32(arenas)) == 0
            ? "\(arenas) allocator arena (MALLOC_ARENA_MAX changes it)"
            : "the allocator's default arenas (limiting them to \(arenas) was refused)"
    }

    /// Gives the allocator's free pages back to the system.
    public static func returnFreeMemory() {
        _ = sp_return_free_memory()
    }

    /// The bytes allocated now (`inUse`), and those the allocator holds for them from the system (`held`, in use
    /// or kept free): the daemon's live data, told apart from the allocator's growth around it.
    public static func figures() -> (inUse: Int, held: Int) {
        var inUse = 0
        var held = 0
        sp_allocator_figures(&inUse, &held)
        return (inUse, held)
    }
}
