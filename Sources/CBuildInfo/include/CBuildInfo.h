#ifndef SLEEPPROXY_CBUILDINFO_H
#define SLEEPPROXY_CBUILDINFO_H

// What the build was told about itself. A Swift module cannot take a string from the build, a C file can: the
// package build (debian/rules) sets SLEEPPROXY_PACKAGE_VERSION in the environment, Package.swift turns it into a
// C definition, and this function returns it.

/// The version of the package this build is for (Debian's, with its revision: "0.2.0-1"), or "" for a build
/// from source.
const char *sp_package_version(void);

#endif
