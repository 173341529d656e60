#ifndef SLEEPPROXY_CPCAP_SHIM_H
#define SLEEPPROXY_CPCAP_SHIM_H

#include <pcap/pcap.h>

#endif
