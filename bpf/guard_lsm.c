/* SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0-only) */
/*
 * guard_lsm: BPF LSM programs that keep a fenced pod's processes from going around the
 * egress guard's nftables fence. They act only in network namespaces listed in
 * weft_guard_fenced, and only on tasks that are neither the namespace's proxy UID nor
 * a node administrator (CAP_SYS_ADMIN in the initial user namespace: the runtime, the
 * CNI plugins, the guard itself; such a task could unload these programs anyway).
 *
 *   socket_create     only AF_UNIX, AF_NETLINK and non-raw AF_INET/AF_INET6 sockets
 *                     (SMC excluded): AF_PACKET frames skip netfilter and, with
 *                     PACKET_QDISC_BYPASS, tc; raw IP sockets can forge packets that
 *                     conntrack files under another UID's established flow       -> EACCES
 *   socket_sendmsg,   the same rule for sockets that exist already (opened before
 *   socket_connect    the fence, or passed in), and an INET socket must belong to
 *                     the task's own namespace (one passed in from another namespace
 *                     sends from there, where no fence is)                        -> EACCES
 *   capable           CAP_NET_ADMIN (could delete the fence) and CAP_NET_RAW are
 *                     refused                                                      -> EPERM
 *   task_fix_setuid,  no task becomes the proxy UID: set*uid() and set-user-ID
 *   bprm_creds_from_file  executables                                              -> EPERM
 *
 * Only the checks that can refuse look the namespace up, so the common case (an
 * ordinary socket, an unrelated capability) costs a few loads and no map lookup.
 */
#include "weft_guard_maps.h"

#include <bpf/bpf_tracing.h>

/* BPF_PROG passes every hook argument (and its own ctx); most programs use few. */
#pragma clang diagnostic ignored "-Wunused-parameter"

/* The few kernel fields read, located at load time against the kernel's BTF (CO-RE),
 * so no vmlinux.h is needed. */
typedef struct {
	__u32 val;
} kuid_t;

typedef struct {
	__u64 val;
} kernel_cap_t;

struct user_namespace {
	int level;
} __attribute__((preserve_access_index));

struct cred {
	kuid_t uid;
	kuid_t suid;
	kuid_t euid;
	kuid_t fsuid;
	kernel_cap_t cap_effective;
	struct user_namespace *user_ns;
} __attribute__((preserve_access_index));

struct net {
	__u64 net_cookie;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct task_struct {
	const struct cred *cred;
	struct nsproxy *nsproxy;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct sock_common {
	unsigned short skc_family;
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

struct socket {
	struct sock *sk;
} __attribute__((preserve_access_index));

struct linux_binprm {
	struct cred *cred;
} __attribute__((preserve_access_index));

struct msghdr;
struct sockaddr;
struct file;

#define WG_AF_UNIX 1
#define WG_AF_INET 2
#define WG_AF_INET6 10
#define WG_AF_NETLINK 16
#define WG_SOCK_STREAM 1
#define WG_SOCK_DGRAM 2
#define WG_SOCK_SEQPACKET 5
#define WG_SOCK_TYPE_MASK 0xf
#define WG_IPPROTO_SMC 256
#define WG_CAP_NET_ADMIN 12
#define WG_CAP_NET_RAW 13
#define WG_CAP_SYS_ADMIN 21
#define WG_EPERM 1
#define WG_EACCES 13

/* Whether a socket of this kind stays behind the fence: its packets pass the output
 * chain with the owner's UID, or it cannot leave the namespace at all. */
static __always_inline int kind_allowed(int family, int type, int protocol)
{
	switch (family) {
	case WG_AF_UNIX:
	case WG_AF_NETLINK:
		return 1;
	case WG_AF_INET:
	case WG_AF_INET6:
		type &= WG_SOCK_TYPE_MASK;
		return (type == WG_SOCK_STREAM || type == WG_SOCK_DGRAM ||
			type == WG_SOCK_SEQPACKET) &&
		       protocol != WG_IPPROTO_SMC;
	default:
		return 0;
	}
}

static __always_inline struct net *net_of_task(struct task_struct *task)
{
	struct nsproxy *nsproxy = task->nsproxy;

	/* NULL for a task that is exiting. */
	return nsproxy ? nsproxy->net_ns : 0;
}

static __always_inline __u64 cookie_of(struct net *net)
{
	return net ? net->net_cookie : 0;
}

/* CAP_SYS_ADMIN in the initial user namespace: node administration. */
static __always_inline int node_admin(const struct cred *cred)
{
	struct user_namespace *ns = cred->user_ns;

	return (cred->cap_effective.val & (1ULL << WG_CAP_SYS_ADMIN)) && ns && ns->level == 0;
}

/* The fence that confines `cred` in the calling task's namespace, or NULL. */
static __always_inline struct weft_guard_fence *confining(const struct cred *cred)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct weft_guard_netns key = {};
	struct weft_guard_fence *fence;

	key.cookie = cookie_of(net_of_task(task));
	if (!key.cookie)
		return 0;
	fence = bpf_map_lookup_elem(&weft_guard_fenced, &key);
	if (!fence)
		return 0;
	if (cred->fsuid.val == fence->proxy_uid || node_admin(cred))
		return 0;
	return fence;
}

static __always_inline const struct cred *current_cred(void)
{
	return bpf_get_current_task_btf()->cred;
}

/* An existing socket used by the calling task: its kind, and for INET its namespace. */
static __always_inline int socket_use(struct socket *sock)
{
	struct sock *sk = sock->sk;
	int family;

	if (!sk)
		return 0;
	family = sk->__sk_common.skc_family;
	if (kind_allowed(family, sk->sk_type, sk->sk_protocol)) {
		if (family != WG_AF_INET && family != WG_AF_INET6)
			return 0;
		if (cookie_of(sk->__sk_common.skc_net.net) ==
		    cookie_of(net_of_task(bpf_get_current_task_btf())))
			return 0;
	}
	return confining(current_cred()) ? -WG_EACCES : 0;
}

SEC("lsm/socket_create")
int BPF_PROG(wg_sock_create, int family, int type, int protocol, int kern)
{
	if (kern || kind_allowed(family, type, protocol))
		return 0;
	return confining(current_cred()) ? -WG_EACCES : 0;
}

SEC("lsm/socket_sendmsg")
int BPF_PROG(wg_sock_sendmsg, struct socket *sock, struct msghdr *msg, int size)
{
	return socket_use(sock);
}

SEC("lsm/socket_connect")
int BPF_PROG(wg_sock_connect, struct socket *sock, struct sockaddr *address, int addrlen)
{
	return socket_use(sock);
}

SEC("lsm/capable")
int BPF_PROG(wg_capable, const struct cred *cred, struct user_namespace *ns, int cap,
	     unsigned int opts)
{
	if (cap != WG_CAP_NET_ADMIN && cap != WG_CAP_NET_RAW)
		return 0;
	return confining(cred) ? -WG_EPERM : 0;
}

static __always_inline int holds_uid(const struct cred *cred, __u32 uid)
{
	return cred->uid.val == uid || cred->euid.val == uid || cred->suid.val == uid ||
	       cred->fsuid.val == uid;
}

/* Refuses a change of credentials that makes a confined task the proxy. */
static __always_inline int becoming_proxy(const struct cred *new, const struct cred *old)
{
	struct weft_guard_fence *fence = confining(old);

	if (!fence || holds_uid(old, fence->proxy_uid))
		return 0;
	return holds_uid(new, fence->proxy_uid) ? -WG_EPERM : 0;
}

SEC("lsm/task_fix_setuid")
int BPF_PROG(wg_setuid, struct cred *new, const struct cred *old, int flags)
{
	return becoming_proxy(new, old);
}

SEC("lsm/bprm_creds_from_file")
int BPF_PROG(wg_exec_setuid, struct linux_binprm *bprm, struct file *file)
{
	return becoming_proxy(bprm->cred, current_cred());
}

char LICENSE[] SEC("license") = "GPL";
