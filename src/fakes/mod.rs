pub mod apiserver;
pub mod kubelet;
