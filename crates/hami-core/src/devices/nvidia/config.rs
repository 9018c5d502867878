//! The device config's `nvidia` section and the Helm chart's values for it.

use serde::Deserialize;

/// One `migProfileAllowlist` entry: the MIG profiles allowed on the listed GPU models.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MigAllowlistEntry {
    pub models: Vec<String>,
    pub profiles: Vec<String>,
}

/// The device config's `nvidia` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct NvidiaConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_memory_percentage_name: String,
    pub resource_core_name: String,
    pub resource_priority_name: String,
    pub overwrite_env: bool,
    #[serde(rename = "defaultMemory")]
    pub default_memory: u64,
    #[serde(rename = "defaultCores")]
    pub default_cores: u32,
    #[serde(rename = "defaultGPUNum")]
    pub default_gpu_num: u32,
    pub memory_factor: u64,
    pub disable_core_limit: bool,
    pub gpu_core_policy: String,
    pub runtime_class_name: String,
    pub mig_profile_allowlist: Vec<MigAllowlistEntry>,
    pub device_split_count: u32,
    pub device_memory_scaling: f64,
    pub device_core_scaling: f64,
}

impl NvidiaConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        NvidiaConfig {
            resource_count_name: "nvidia.com/gpu".into(),
            resource_memory_name: "nvidia.com/gpumem".into(),
            resource_memory_percentage_name: "nvidia.com/gpumem-percentage".into(),
            resource_core_name: "nvidia.com/gpucores".into(),
            resource_priority_name: "nvidia.com/priority".into(),
            overwrite_env: false,
            default_memory: 0,
            default_cores: 0,
            default_gpu_num: 1,
            memory_factor: 1,
            disable_core_limit: false,
            gpu_core_policy: "default".into(),
            runtime_class_name: String::new(),
            mig_profile_allowlist: Vec::new(),
            device_split_count: 10,
            device_memory_scaling: 1.0,
            device_core_scaling: 1.0,
        }
    }
}
