// The process's own capability sets through the capget and capset system calls (version 3: two 32-bit words per
// set), without libcap.

#include "CNetSupport.h"

#include <errno.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int64_t sp_raise_effective_capabilities(uint64_t wanted) {
    struct __user_cap_header_struct header;
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(&header, 0, sizeof header);
    memset(data, 0, sizeof data);
    header.version = _LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    if (syscall(SYS_capget, &header, data) != 0) return -errno;
    uint64_t permitted = (uint64_t)data[0].permitted | ((uint64_t)data[1].permitted << 32);
    uint64_t effective = (uint64_t)data[0].effective | ((uint64_t)data[1].effective << 32);
    uint64_t raised = effective | (wanted & permitted);
    if (raised != effective) {
        data[0].effective = (uint32_t)raised;
        data[1].effective = (uint32_t)(raised >> 32);
        header.version = _LINUX_CAPABILITY_VERSION_3;
        header.pid = 0;
        if (syscall(SYS_capset, &header, data) != 0) return -errno;
    }
    return (int64_t)(raised & 0x7FFFFFFFFFFFFFFFull);
}
