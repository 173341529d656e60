#ifndef SLEEPPROXY_CSQLITE_SHIM_H
#define SLEEPPROXY_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import: it tells SQLite to
/// copy the bound bytes before the bind call returns.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// SQLITE_STATIC (a null destructor): the caller keeps the bound bytes alive until the statement is reset.
static inline sqlite3_destructor_type csqlite_static(void) {
    return SQLITE_STATIC;
}

/// sqlite3_db_config is variadic, which Swift cannot call: turns checkpointing when the connection closes off (1)
/// or back on (0). Off, a close leaves the database file and its write-ahead log exactly as they were.
static inline int csqlite_set_no_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, (int *)0);
}

#endif
