// Wake-on-LAN through the SIOCETHTOOL ioctl (ETHTOOL_GWOL / ETHTOOL_SWOL), as `ethtool eth0` and
// `ethtool -s eth0 wol g` do, and the driver's name (ETHTOOL_GDRVINFO), as `ethtool -i eth0` prints it. The ioctl
// is older than ethtool's netlink interface and every kernel has it.

#include "CNetSupport.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int ethtool_request(const char *interface_name, void *command) {
    if (strlen(interface_name) >= IFNAMSIZ) return -ENODEV;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strncpy(request.ifr_name, interface_name, IFNAMSIZ - 1);
    request.ifr_data = command;
    int result = ioctl(fd, SIOCETHTOOL, &request) < 0 ? -errno : 0;
    close(fd);
    return result;
}

int sp_wake_on_lan_get(const char *interface_name, uint32_t *supported, uint32_t *enabled) {
    struct ethtool_wolinfo wol;
    memset(&wol, 0, sizeof wol);
    wol.cmd = ETHTOOL_GWOL;
    int result = ethtool_request(interface_name, &wol);
    if (result < 0) return result;
    *supported = wol.supported;
    *enabled = wol.wolopts;
    return 0;
}

int sp_wake_on_lan_set(const char *interface_name, uint32_t enabled) {
    // Read first, so that the fields not set here (the SecureOn password) are written back unchanged.
    struct ethtool_wolinfo wol;
    memset(&wol, 0, sizeof wol);
    wol.cmd = ETHTOOL_GWOL;
    int result = ethtool_request(interface_name, &wol);
    if (result < 0) return result;
    wol.cmd = ETHTOOL_SWOL;
    wol.wolopts = enabled;
    return ethtool_request(interface_name, &wol);
}

int sp_interface_driver(const char *interface_name, char *driver, size_t capacity) {
    struct ethtool_drvinfo info;
    memset(&info, 0, sizeof info);
    info.cmd = ETHTOOL_GDRVINFO;
    int result = ethtool_request(interface_name, &info);
    if (result < 0) return result;
    if (capacity == 0) return -EINVAL;
    size_t length = strnlen(info.driver, sizeof info.driver);
    if (length >= capacity) length = capacity - 1;
    memcpy(driver, info.driver, length);
    driver[length] = 0;
    return 0;
}
