#include "CBuildInfo.h"

#ifndef SLEEPPROXY_PACKAGE_VERSION
#define SLEEPPROXY_PACKAGE_VERSION ""
#endif

const char *sp_package_version(void) { return SLEEPPROXY_PACKAGE_VERSION; }
