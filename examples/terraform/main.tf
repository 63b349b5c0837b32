# meson as code: a private network, the seed VM (examples/vm.json), the seed
# cluster (examples/kaas.json) with a second node pool, and the cluster's
# kubeconfig. Run with the provider installed through dev_overrides (see
# docs/terraform/index.md): `terraform apply`.

terraform {
  required_providers {
    meson = {
      source = "elemento/meson"
    }
  }
}

# Without endpoint and token: MESON_URL and MESON_TOKEN, else the running
# `mesond dev` found from the working directory.
provider "meson" {}

variable "kubernetes_version" {
  description = "The cluster's Kubernetes version: a later one upgrades it in place."
  type        = string
  default     = "1.35"
}

variable "workers_desired_nodes" {
  description = "How many nodes the second pool runs."
  type        = number
  default     = 1
}

resource "meson_network" "backend" {
  name = "backend"
  cidr = "10.10.0.0/24"
  labels = {
    env = "dev"
  }
}

# The seed VM.
resource "meson_vm" "test" {
  name             = "test"
  cores            = 2
  threads_per_core = 1
  smt              = false
  min_frequency    = 1.0
  arch             = ["X86_64"]
  cpu_flags        = []
  memory_mib       = 4096
  require_ecc      = false
  os               = "Debian"
  ssh_keys         = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLavtiPfhiG3t6TAxHosXoVh7Pc/lSD8L9SNPyAzp1d user@host"]
  provider_name    = "ionos"

  volume {
    name      = "test"
    size      = 30
    private   = true
    shareable = false
    bootable  = false
    readonly  = false
  }

  labels = {
    env = "dev"
  }

  timeouts {
    create = "10m"
  }
}

# The seed cluster.
resource "meson_cluster" "test8" {
  name               = "test8"
  kubernetes_version = var.kubernetes_version
  update_policy      = "NEVER_UPDATE"
  provider_name      = "arubacloud"

  subnet {
    cidr          = "192.168.1.0/24"
    dhcp          = true
    start_address = "192.168.1.0"
    last_address  = "192.168.1.24"
  }

  default_pool {
    name          = "1poolname"
    autoscale     = false
    desired_nodes = 3
    min_nodes     = 3
    max_nodes     = 3
    cpu           = 2
    ram           = 4096
    storage       = 40
    gpu           = 0
    billing       = "HOURLY"
  }

  timeouts {
    create = "30m"
  }
}

# A second pool: its size changes in place.
resource "meson_node_pool" "workers" {
  cluster_id    = meson_cluster.test8.id
  name          = "workers"
  desired_nodes = var.workers_desired_nodes
  min_nodes     = 1
  max_nodes     = 5
  cpu           = 2
  ram           = 2048
  labels = {
    role = "workers"
  }
}

# A fresh admin kubeconfig at every plan (meson mints a new credential each
# time): hand it to the kubernetes or helm provider, e.g.
#   provider "kubernetes" { config_path = ... } or host/client certificates.
data "meson_cluster_kubeconfig" "test8" {
  cluster_id     = meson_cluster.test8.id
  expiry_seconds = 3600
}

output "vm_ipv4" {
  value = meson_vm.test.ipv4
}

output "cluster_endpoint" {
  value = meson_cluster.test8.endpoint
}
