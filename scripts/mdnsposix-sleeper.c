/*
 * mDNSSleeperPosix: one service published by Apple's mDNSCore on Linux, on a machine that can be told to sleep
 * and to wake. Built by scripts/build-mdnsposix.sh against the objects of Apple's POSIX build; part of
 * sleepproxy's lab, not of Apple's code.
 *
 * Apple's own POSIX programs never call the core's sleep entry point, mDNSCoreMachineSleep(): on a Mac, the
 * platform layer calls it when the system is about to sleep. This program does so on SIGUSR1, so that the lab
 * sees what a Mac with no sleep proxy to register with sends on its way down: the core's SendSleepGoodbyes(),
 * which marks its shared records (the PTRs of its services) for goodbye and sends them at once; asleep, the core
 * gives every record of those packets TTL 0, the SRV, TXT and addresses that ride along with the PTRs too
 * (unless it sent them a moment before, when they are left out).
 *
 *   mDNSSleeperPosix -n NAME -t TYPE -p PORT [TXT...]
 *
 * SIGUSR1: sleep (mDNSCoreMachineSleep(m, true)). SIGUSR2: wake (mDNSCoreMachineSleep(m, false)). SIGINT or
 * SIGTERM: deregister and exit. Its host name is the system's (gethostname()). It writes to standard error
 * "registered" when its service is registered, "name conflict" when the core reports one (it then lets the
 * core pick a new name, as a Mac does), "sleeping" and "awake" when it has told the core.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include "mDNSEmbeddedAPI.h"
#include "mDNSPosix.h"

mDNS mDNSStorage;
const char ProgramName[] = "mDNSSleeperPosix"; /* the name the core's log messages carry */
static mDNS_PlatformSupport platform;
static ServiceRecordSet service;

static volatile sig_atomic_t wantSleep, wantWake, wantExit;

static void onSignal(int number)
{
    if (number == SIGUSR1) wantSleep = 1;
    else if (number == SIGUSR2) wantWake = 1;
    else wantExit = 1;
}

static void say(const char *what)
{
    fprintf(stderr, "mDNSSleeperPosix: %s\n", what);
    fflush(stderr);
}

static void serviceCallback(mDNS *const m, ServiceRecordSet *const set, mStatus result)
{
    if (result == mStatus_NoError) {
        say("registered");
    } else if (result == mStatus_NameConflict) {
        say("name conflict");
        mDNS_RenameAndReregisterService(m, set, mDNSNULL);
    }
}

static void usage(const char *program)
{
    fprintf(stderr, "usage: %s -n NAME -t TYPE -p PORT [TXT...]\n", program);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *name = NULL, *type = NULL;
    long port = -1;
    int option;
    while ((option = getopt(argc, argv, "n:t:p:")) != -1) {
        switch (option) {
        case 'n': name = optarg; break;
        case 't': type = optarg; break;
        case 'p': port = strtol(optarg, NULL, 10); break;
        default: usage(argv[0]);
        }
    }
    if (name == NULL || type == NULL || port < 1 || port > 65535) usage(argv[0]);

    /* The TXT record: each remaining argument one length-prefixed string. */
    mDNSu8 txt[sizeof(RDataBody)];
    mDNSu16 txtLength = 0;
    for (int index = optind; index < argc; index++) {
        size_t length = strlen(argv[index]);
        if (length > 255 || txtLength + 1 + length > sizeof(txt)) usage(argv[0]);
        txt[txtLength] = (mDNSu8)length;
        memcpy(txt + txtLength + 1, argv[index], length);
        txtLength += (mDNSu16)(1 + length);
    }

    mDNS *const m = &mDNSStorage;
    mStatus status = mDNS_Init(m, &platform, mDNS_Init_NoCache, mDNS_Init_ZeroCacheSize,
                               mDNS_Init_AdvertiseLocalAddresses, mDNS_Init_NoInitCallback,
                               mDNS_Init_NoInitCallbackContext);
    if (status != mStatus_NoError) {
        fprintf(stderr, "mDNSSleeperPosix: mDNS_Init failed: %d\n", (int)status);
        return 1;
    }
    domainlabel label;
    domainname serviceType, domain;
    MakeDomainLabelFromLiteralString(&label, name);
    if (MakeDomainNameFromDNSNameString(&serviceType, type) == mDNSNULL) usage(argv[0]);
    MakeDomainNameFromDNSNameString(&domain, "local.");
    status = mDNS_RegisterService(m, &service, &label, &serviceType, &domain, mDNSNULL,
                                  mDNSOpaque16fromIntVal((mDNSu16)port), mDNSNULL, txt, txtLength, mDNSNULL, 0,
                                  mDNSInterface_Any, serviceCallback, mDNSNULL, 0);
    if (status != mStatus_NoError) {
        fprintf(stderr, "mDNSSleeperPosix: mDNS_RegisterService failed: %d\n", (int)status);
        return 1;
    }

    /* No SA_RESTART: a signal interrupts select(), and the loop acts on it. One that arrives between the
       checks and select() waits for the next event; the core wakes select() at least every few seconds. */
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    for (int number = 0; number < 4; number++) {
        const int signals[] = { SIGUSR1, SIGUSR2, SIGINT, SIGTERM };
        sigaction(signals[number], &action, NULL);
    }

    while (!wantExit) {
        if (wantSleep) {
            wantSleep = 0;
            mDNSCoreMachineSleep(m, mDNStrue);
            say("sleeping");
        }
        if (wantWake) {
            wantWake = 0;
            mDNSCoreMachineSleep(m, mDNSfalse);
            say("awake");
        }
        int count = 0;
        fd_set readable, writable;
        FD_ZERO(&readable);
        FD_ZERO(&writable);
        struct timeval timeout = { .tv_sec = 5, .tv_usec = 0 };
        mDNSPosixGetFDSet(m, &count, &readable, &writable, &timeout);
        int ready = select(count, &readable, &writable, NULL, &timeout);
        if (ready < 0) {
            if (errno == EINTR) continue;
            perror("mDNSSleeperPosix: select");
            break;
        }
        mDNSPosixProcessFDSet(m, &readable, &writable);
    }
    mDNS_DeregisterService(m, &service);
    mDNS_Close(m);
    say("exiting");
    return 0;
}
