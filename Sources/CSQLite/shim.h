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

#endif
