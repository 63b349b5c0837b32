#!/bin/bash
# Written by meson: joins this VM to its Kubernetes cluster. Run once by
# cloud-init's runcmd; it exits non-zero on any failure, and the runcmd
# wrapper then powers the VM off so that phone_home never fires.
set -Eeuo pipefail
export DEBIAN_FRONTEND=noninteractive
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# @NODE_VALUES@ meson writes the node's values here (see bootstrap/script.rs).

log() { printf 'meson-bootstrap: %s\n' "$*" >&2; }
trap 'log "failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# retry ATTEMPTS DELAY COMMAND...: bounded retries for what the network can break.
retry() {
  local attempts=$1 delay=$2 i
  shift 2
  for ((i = 1; i <= attempts; i++)); do
    if "$@"; then return 0; fi
    log "attempt $i/$attempts failed: $*"
    if ((i < attempts)); then sleep "$delay"; fi
  done
  return 1
}

# wait_for SECONDS WHAT COMMAND...: polls every 5 s until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out waiting for $what"
      return 1
    fi
    sleep 5
  done
}

log "node $NODE_NAME, role $ROLE, Kubernetes $K8S_VERSION"

log "kernel: swap off, modules, sysctls"
swapoff -a
sed -ri '/^[^#].*[[:space:]]swap[[:space:]]/s/^/#/' /etc/fstab
modprobe overlay
modprobe br_netfilter
sysctl -q -p /etc/sysctl.d/99-meson-kubernetes.conf

log "packages: containerd, kubelet/kubeadm/kubectl $K8S_PACKAGE_VERSION"
APT=(apt-get -q -y -o Acquire::Retries=5 -o DPkg::Lock::Timeout=300
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
retry 5 10 "${APT[@]}" update
retry 3 10 "${APT[@]}" install --no-install-recommends ca-certificates curl gpg containerd
install -d -m 0755 /etc/apt/keyrings
retry 5 10 curl -fsSL --max-time 60 -o /tmp/meson-kubernetes-release.key \
  "https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/Release.key"
gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg /tmp/meson-kubernetes-release.key
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/$K8S_MINOR/deb/ /" \
  >/etc/apt/sources.list.d/kubernetes.list
retry 5 10 "${APT[@]}" update
retry 3 10 "${APT[@]}" install --no-install-recommends \
  "kubelet=$K8S_PACKAGE_VERSION" "kubeadm=$K8S_PACKAGE_VERSION" "kubectl=$K8S_PACKAGE_VERSION"
apt-mark hold kubelet kubeadm kubectl containerd >/dev/null
systemctl restart containerd
systemctl enable kubelet

if [ "$ROLE" != worker ]; then
  log "kube-vip for $VIP"
  iface=
  if [ -n "$NODE_IP" ]; then
    iface=$(ip -o -4 addr show | awk -v ip="$NODE_IP" '{ split($4, a, "/"); if (a[1] == ip) { print $2; exit } }')
  fi
  if [ -z "$iface" ]; then
    iface=$(ip -o -4 route get "$VIP" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  fi
  iface=${iface%%@*}
  if ! [[ "$iface" =~ ^[A-Za-z0-9_.:-]+$ ]]; then
    log "no network interface found for the VIP $VIP"
    exit 1
  fi
  install -d -m 0755 /etc/kubernetes/manifests
  sed "s/__MESON_VIP_INTERFACE__/$iface/" /etc/meson/kube-vip.yaml >/etc/kubernetes/manifests/kube-vip.yaml
  retry 5 10 timeout 600 kubeadm config images pull \
    --kubernetes-version "v$K8S_VERSION" --cri-socket unix:///run/containerd/containerd.sock
fi

if [ "$ROLE" = join-control-plane ]; then
  # kubeadm join --control-plane runs the control plane at the version in
  # the cluster's kubeadm-config and refuses a kubelet newer than it: a node
  # replacing an older one (a rolling upgrade) first brings that version up
  # to its own, as `kubeadm upgrade apply` does.
  log "kubeadm-config: Kubernetes v$K8S_VERSION or older"
  kubeadm kubeconfig user --config /etc/meson/kubeadm-client.yaml \
    --client-name meson:control-plane-join --org system:masters \
    --validity-period 2h >/etc/meson/join-admin.conf
  chmod 0600 /etc/meson/join-admin.conf
  K=(kubectl --kubeconfig /etc/meson/join-admin.conf)
  wait_for 600 "the API server" "${K[@]}" get --raw=/readyz
  retry 5 10 "${K[@]}" -n kube-system get configmap kubeadm-config \
    -o jsonpath='{.data.ClusterConfiguration}' >/etc/meson/cluster-configuration.yaml
  have=$(sed -n 's/^kubernetesVersion: *"\{0,1\}v\{0,1\}\([0-9][0-9.]*\)"\{0,1\} *$/\1/p' \
    /etc/meson/cluster-configuration.yaml)
  if [ -z "$have" ]; then
    log "kubeadm-config has no kubernetesVersion"
    exit 1
  fi
  newest=$(printf '%s\n%s\n' "$have" "$K8S_VERSION" | sort -V | tail -n 1)
  if [ "$have" != "$K8S_VERSION" ] && [ "$newest" = "$K8S_VERSION" ]; then
    log "kubeadm-config: Kubernetes v$have -> v$K8S_VERSION"
    sed -i "s/^kubernetesVersion: .*/kubernetesVersion: v$K8S_VERSION/" \
      /etc/meson/cluster-configuration.yaml
    put_cluster_configuration() {
      "${K[@]}" -n kube-system create configmap kubeadm-config \
        --from-file=ClusterConfiguration=/etc/meson/cluster-configuration.yaml \
        --dry-run=client -o yaml | "${K[@]}" replace -f -
    }
    retry 5 10 put_cluster_configuration
  fi
  rm -f /etc/meson/join-admin.conf
fi

case "$ROLE" in
  init)
    log "kubeadm init"
    timeout 1200 kubeadm init --config /etc/meson/kubeadm.yaml
    ;;
  *)
    log "kubeadm join"
    join() {
      timeout 1200 kubeadm join --config /etc/meson/kubeadm.yaml && return 0
      kubeadm reset --force >/dev/null 2>&1 || true
      return 1
    }
    retry 3 30 join
    ;;
esac

log "waiting for the kubelet"
wait_for 300 "the kubelet's /healthz" curl -sf --max-time 5 http://127.0.0.1:10248/healthz

if [ "$ROLE" = join-control-plane ]; then
  # The token nodes join with from now on (a new one after a credentials
  # rotation), and the end of the revoked ones.
  export KUBECONFIG=/etc/kubernetes/admin.conf
  wait_for 300 "the API server" kubectl get --raw=/readyz
  token_id=${BOOTSTRAP_TOKEN_REGISTER%%.*}
  if ! kubectl -n kube-system get secret "bootstrap-token-$token_id" >/dev/null 2>&1; then
    log "bootstrap token $token_id: registering"
    retry 5 10 kubeadm token create "$BOOTSTRAP_TOKEN_REGISTER" --ttl "${TOKEN_TTL}s" \
      --description "meson node bootstrap token" --usages signing,authentication \
      --groups system:bootstrappers:kubeadm:default-node-token
  fi
  for id in $BOOTSTRAP_TOKEN_REVOKE; do
    log "bootstrap token $id: revoking"
    kubeadm token delete "$id" >/dev/null 2>&1 || true
  done
  if [ -n "$REPLACES" ]; then
    # The node this one replaces leaves etcd now, while both run: meson
    # removes its VM only after this node phoned home, so etcd keeps quorum.
    log "etcd: removing the member of $REPLACES"
    etcdctl() {
      kubectl -n kube-system exec "etcd-$NODE_NAME" -- etcdctl \
        --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
        --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key "$@"
    }
    wait_for 300 "this node's etcd member" etcdctl endpoint health
    member=$(etcdctl member list | awk -F', ' -v n="$REPLACES" '$3 == n { print $1 }')
    if [ -n "$member" ]; then
      retry 5 10 etcdctl member remove "$member"
    fi
    retry 5 10 kubectl delete node "$REPLACES" --ignore-not-found
  fi
  unset KUBECONFIG
fi

if [ "$ROLE" = init ]; then
  export KUBECONFIG=/etc/kubernetes/admin.conf
  wait_for 300 "the API server" kubectl get --raw=/readyz
  log "CNI: $CNI $CNI_VERSION, pod CIDR $POD_CIDR"
  case "$CNI" in
    calico)
      retry 5 10 curl -fsSL --max-time 120 -o /tmp/meson-cni.yaml "$CNI_URL"
      sed -i -e 's|# - name: CALICO_IPV4POOL_CIDR|- name: CALICO_IPV4POOL_CIDR|' \
        -e "s|#   value: \"192.168.0.0/16\"|  value: \"$POD_CIDR\"|" /tmp/meson-cni.yaml
      grep -Eq '^[[:space:]]+- name: CALICO_IPV4POOL_CIDR' /tmp/meson-cni.yaml
      grep -Eq "^[[:space:]]+value: \"$POD_CIDR\"" /tmp/meson-cni.yaml
      retry 10 10 kubectl apply --server-side --force-conflicts -f /tmp/meson-cni.yaml
      ;;
    flannel)
      retry 5 10 curl -fsSL --max-time 120 -o /tmp/meson-cni.yaml "$CNI_URL"
      sed -i "s|\"Network\": \"10.244.0.0/16\"|\"Network\": \"$POD_CIDR\"|" /tmp/meson-cni.yaml
      grep -q -- "\"Network\": \"$POD_CIDR\"" /tmp/meson-cni.yaml
      retry 10 10 kubectl apply --server-side --force-conflicts -f /tmp/meson-cni.yaml
      ;;
    cilium)
      arch=$(dpkg --print-architecture)
      cd /tmp
      retry 5 10 curl -fsSL --max-time 300 --remote-name-all \
        "${CNI_URL}cilium-linux-$arch.tar.gz" "${CNI_URL}cilium-linux-$arch.tar.gz.sha256sum"
      sha256sum --check --quiet "cilium-linux-$arch.tar.gz.sha256sum"
      tar -xzf "cilium-linux-$arch.tar.gz" -C /usr/local/bin cilium
      cd /
      timeout 600 cilium install --version "$CNI_VERSION" --set ipam.mode=kubernetes
      ;;
    *)
      log "unknown CNI $CNI"
      exit 1
      ;;
  esac
  if [ "$KUBE_VIP_REVERT_SUPER_ADMIN" = yes ]; then
    # kube-vip needed super-admin.conf while the API had no RBAC bindings;
    # give it the ordinary admin.conf now (kubelet restarts the pod).
    log "kube-vip: back to admin.conf"
    sed -i 's#path: "/etc/kubernetes/super-admin.conf"#path: "/etc/kubernetes/admin.conf"#' \
      /etc/kubernetes/manifests/kube-vip.yaml
    # The kubelet rereads static pod manifests every 20 s.
    sleep 30
    wait_for 300 "the API server behind the VIP" kubectl get --raw=/readyz
  fi
fi

log "done: the kubelet is healthy"
