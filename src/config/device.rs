//! HAMi's device config file (see docs/configuration.md, "Device config file"): one section per
//! vendor, unknown keys ignored, keys case-sensitive. Absent sections take the chart's defaults so
//! a bare `serve` works.

use serde::{Deserialize, Deserializer};

fn s(v: &str) -> String {
    v.to_owned()
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("device config is not valid YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("device config: {0}")]
    Invalid(String),
}

/// The whole file.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct DeviceConfig {
    pub nvidia: NvidiaConfig,
    pub cambricon: CambriconConfig,
    pub hygon: HygonConfig,
    pub metax: MetaxConfig,
    pub enflame: EnflameConfig,
    pub mthreads: MthreadsConfig,
    pub iluvatars: Vec<IluvatarConfig>,
    pub kunlun: KunlunConfig,
    pub awsneuron: AwsNeuronConfig,
    pub amd: AmdConfig,
    pub vastai: CountOnlyConfig,
    pub biren: CountOnlyConfig,
    #[serde(deserialize_with = "vnpus_any_shape")]
    pub vnpus: VnpuConfig,
}

impl DeviceConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        DeviceConfig {
            nvidia: NvidiaConfig::chart(),
            cambricon: CambriconConfig::chart(),
            hygon: HygonConfig::chart(),
            metax: MetaxConfig::chart(),
            enflame: EnflameConfig::chart(),
            mthreads: MthreadsConfig::chart(),
            iluvatars: default_iluvatars(),
            kunlun: KunlunConfig::chart(),
            awsneuron: AwsNeuronConfig::chart(),
            amd: AmdConfig::chart(),
            vastai: CountOnlyConfig { resource_count_name: s("vastaitech.com/va") },
            biren: CountOnlyConfig { resource_count_name: s("birentech.com/gpu") },
            vnpus: VnpuConfig::chart_defaults(),
        }
    }
}

impl DeviceConfig {
    /// Parses a config file as HAMi does: a key or section the file leaves out takes Go's zero
    /// value (an empty resource name disables that vendor). An empty file means the chart's values.
    pub fn from_yaml(text: &str) -> Result<DeviceConfig, Error> {
        if text.trim().is_empty() {
            return Ok(DeviceConfig::chart());
        }
        let c: DeviceConfig = serde_yaml::from_str(text)?;
        c.validate()?;
        Ok(c)
    }

    /// HAMi's start-up checks: `migProfileAllowlist` entries need models and profiles, and each
    /// profile looks like `1g.5gb` (a `.`, and before it at least two characters ending in `g`).
    pub fn validate(&self) -> Result<(), Error> {
        for (i, e) in self.nvidia.mig_profile_allowlist.iter().enumerate() {
            if e.models.is_empty() || e.profiles.is_empty() {
                return Err(Error::Invalid(format!(
                    "nvidia.migProfileAllowlist[{i}] needs non-empty models and profiles"
                )));
            }
            for p in &e.profiles {
                let ok = p.split_once('.').is_some_and(|(head, _)| head.len() >= 2 && head.ends_with('g'));
                if !ok {
                    return Err(Error::Invalid(format!(
                        "nvidia.migProfileAllowlist[{i}]: profile {p:?} is not of the form <n>g.<mem>"
                    )));
                }
            }
        }
        // Vendors are numbered by a byte (`VendorId`); the 14 fixed vendors and every Ascend and
        // Iluvatar chip must fit, or building the registry would abort.
        let chips = self.vnpus.configs.len() + self.iluvatars.len();
        if chips > MAX_CHIPS {
            return Err(Error::Invalid(format!(
                "{chips} Ascend and Iluvatar chips are configured; at most {MAX_CHIPS} are supported"
            )));
        }
        Ok(())
    }
}

/// `u8::MAX - 1` vendors in all (`Vendors::new`), less the 14 that are always registered.
const MAX_CHIPS: usize = 240;

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MigAllowlistEntry {
    pub models: Vec<String>,
    pub profiles: Vec<String>,
}

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
            resource_count_name: s("nvidia.com/gpu"),
            resource_memory_name: s("nvidia.com/gpumem"),
            resource_memory_percentage_name: s("nvidia.com/gpumem-percentage"),
            resource_core_name: s("nvidia.com/gpucores"),
            resource_priority_name: s("nvidia.com/priority"),
            overwrite_env: false,
            default_memory: 0,
            default_cores: 0,
            default_gpu_num: 1,
            memory_factor: 1,
            disable_core_limit: false,
            gpu_core_policy: s("default"),
            runtime_class_name: String::new(),
            mig_profile_allowlist: Vec::new(),
            device_split_count: 10,
            device_memory_scaling: 1.0,
            device_core_scaling: 1.0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CambriconConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

impl CambriconConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        CambriconConfig {
            resource_count_name: s("cambricon.com/vmlu"),
            resource_memory_name: s("cambricon.com/mlu.smlu.vmemory"),
            resource_core_name: s("cambricon.com/mlu.smlu.vcore"),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct HygonConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
    pub memory_factor: u64,
}

impl HygonConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        HygonConfig {
            resource_count_name: s("hygon.com/dcunum"),
            resource_memory_name: s("hygon.com/dcumem"),
            resource_core_name: s("hygon.com/dcucores"),
            memory_factor: 1,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MetaxConfig {
    pub resource_count_name: String,
    pub resource_v_count_name: String,
    pub resource_v_memory_name: String,
    pub resource_v_core_name: String,
    pub sgpu_topology_aware: bool,
}

impl MetaxConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        MetaxConfig {
            resource_count_name: s("metax-tech.com/gpu"),
            resource_v_count_name: s("metax-tech.com/sgpu"),
            resource_v_memory_name: s("metax-tech.com/vmemory"),
            resource_v_core_name: s("metax-tech.com/vcore"),
            sgpu_topology_aware: false,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EnflameConfig {
    #[serde(rename = "resourceNameGCU")]
    pub resource_name_gcu: String,
    #[serde(rename = "resourceNameDRSGCU")]
    pub resource_name_drs_gcu: String,
    #[serde(rename = "resourceNameGCUMemory")]
    pub resource_name_gcu_memory: String,
    #[serde(rename = "resourceNameGCUCore")]
    pub resource_name_gcu_core: String,
    #[serde(rename = "resourceNameVGCU")]
    pub resource_name_vgcu: String,
    #[serde(rename = "resourceNameVGCUPercentage")]
    pub resource_name_vgcu_percentage: String,
}

impl EnflameConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        EnflameConfig {
            resource_name_gcu: s("enflame.com/gcu"),
            resource_name_drs_gcu: s("enflame.com/drs-gcu"),
            resource_name_gcu_memory: s("enflame.com/gcu-memory"),
            resource_name_gcu_core: s("enflame.com/gcu-core"),
            resource_name_vgcu: String::new(),
            resource_name_vgcu_percentage: String::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MthreadsConfig {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

impl MthreadsConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        MthreadsConfig {
            resource_count_name: s("mthreads.com/vgpu"),
            resource_memory_name: s("mthreads.com/sgpu-memory"),
            resource_core_name: s("mthreads.com/sgpu-core"),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IluvatarConfig {
    pub chip_name: String,
    pub common_word: String,
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
}

fn default_iluvatars() -> Vec<IluvatarConfig> {
    ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
        .iter()
        .map(|c| IluvatarConfig {
            chip_name: s(c),
            common_word: s(c),
            resource_count_name: format!("iluvatar.ai/{c}-vgpu"),
            resource_memory_name: format!("iluvatar.ai/{c}.vMem"),
            resource_core_name: format!("iluvatar.ai/{c}.vCore"),
        })
        .collect()
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct KunlunConfig {
    pub resource_count_name: String,
    pub resource_v_count_name: String,
    pub resource_v_memory_name: String,
}

impl KunlunConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        KunlunConfig {
            resource_count_name: s("kunlunxin.com/xpu"),
            resource_v_count_name: s("kunlunxin.com/vxpu"),
            resource_v_memory_name: s("kunlunxin.com/vxpu-memory"),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AwsNeuronConfig {
    pub resource_count_name: String,
    pub resource_core_name: String,
}

impl AwsNeuronConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        AwsNeuronConfig {
            resource_count_name: s("aws.amazon.com/neuron"),
            resource_core_name: s("aws.amazon.com/neuroncore"),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AmdConfig {
    pub resource_count_name: String,
    pub resource_core_name: String,
    pub resource_memory_name: String,
}

impl AmdConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        AmdConfig {
            resource_count_name: s("amd.com/gpu"),
            resource_core_name: s("amd.com/gpucores"),
            resource_memory_name: s("amd.com/gpumem"),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CountOnlyConfig {
    pub resource_count_name: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VnpuTemplate {
    pub name: String,
    pub memory: u64,
    pub ai_core: u32,
    #[serde(rename = "aiCPU")]
    pub ai_cpu: u32,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VnpuChipConfig {
    pub chip_name: String,
    pub common_word: String,
    pub resource_name: String,
    pub resource_memory_name: String,
    pub resource_core_name: String,
    pub memory_allocatable: u64,
    pub memory_capacity: u64,
    pub memory_factor: u64,
    pub ai_core: u32,
    #[serde(rename = "aiCPU")]
    pub ai_cpu: u32,
    pub runtime_class_name: String,
    pub overwrite_env: bool,
    pub super_pod: bool,
    pub templates: Vec<VnpuTemplate>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VnpuConfig {
    pub hami_vnpu_core: bool,
    pub configs: Vec<VnpuChipConfig>,
}

/// Accepts both shapes: `{hamiVnpuCore, configs}` (v2.9.0+) and the older bare list of chips.
fn vnpus_any_shape<'de, D: Deserializer<'de>>(d: D) -> Result<VnpuConfig, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shape {
        List(Vec<VnpuChipConfig>),
        Map(VnpuConfig),
        Null(()),
    }
    Ok(match Shape::deserialize(d)? {
        Shape::List(configs) => VnpuConfig { hami_vnpu_core: false, configs },
        Shape::Map(mut m) => {
            for c in &mut m.configs {
                c.templates.sort_by_key(|t| t.memory);
            }
            m
        }
        Shape::Null(()) => VnpuConfig::default(),
    })
}

impl VnpuConfig {
    /// The Ascend chips of HAMi's Helm chart, used when no config file names any.
    pub fn chart_defaults() -> VnpuConfig {
        let t = |name: &str, memory: u64, ai_core: u32, ai_cpu: u32| VnpuTemplate {
            name: s(name),
            memory,
            ai_core,
            ai_cpu,
        };
        let b3 = || vec![t("vir05_1c_16g", 16384, 5, 1), t("vir10_3c_32g", 32768, 10, 3)];
        let chip = |cw: &str,
                    chip: &str,
                    alloc: u64,
                    cap: u64,
                    ai_core: u32,
                    templates: Vec<VnpuTemplate>,
                    super_pod: bool| VnpuChipConfig {
            chip_name: s(chip),
            common_word: s(cw),
            resource_name: format!("huawei.com/{cw}"),
            resource_memory_name: format!("huawei.com/{cw}-memory"),
            resource_core_name: format!("huawei.com/{cw}-core"),
            memory_allocatable: alloc,
            memory_capacity: cap,
            memory_factor: 1,
            ai_core,
            ai_cpu: 7,
            runtime_class_name: String::new(),
            overwrite_env: false,
            super_pod,
            templates,
        };
        VnpuConfig {
            hami_vnpu_core: false,
            configs: vec![
                chip(
                    "Ascend910A",
                    "910A",
                    32768,
                    32768,
                    30,
                    vec![
                        t("vir02", 2184, 2, 1),
                        t("vir04", 4369, 4, 1),
                        t("vir08", 8738, 8, 1),
                        t("vir16", 17476, 16, 1),
                    ],
                    false,
                ),
                chip(
                    "Ascend910B2",
                    "910B2",
                    65536,
                    65536,
                    24,
                    vec![t("vir03_1c_8g", 8192, 3, 1), t("vir06_1c_16g", 16384, 6, 1), t("vir12_3c_32g", 32768, 12, 3)],
                    false,
                ),
                chip("Ascend910B3", "910B3", 65536, 65536, 20, b3(), false),
                chip("Ascend910B4-1", "910B4-1", 65536, 65536, 20, b3(), false),
                chip(
                    "Ascend910B4",
                    "910B4",
                    32768,
                    32768,
                    20,
                    vec![t("vir05_1c_8g", 8192, 5, 1), t("vir10_3c_16g", 16384, 10, 3)],
                    false,
                ),
                chip(
                    "Ascend310P",
                    "310P3",
                    21527,
                    24576,
                    8,
                    vec![t("vir01", 3072, 1, 1), t("vir02", 6144, 2, 2), t("vir04", 12288, 4, 4)],
                    false,
                ),
                chip("Ascend910C", "Ascend910", 65536, 65536, 20, b3(), true),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_chart_defaults() {
        let c = DeviceConfig::from_yaml("").unwrap();
        assert_eq!(c.nvidia.resource_count_name, "nvidia.com/gpu");
        assert_eq!(c.nvidia.default_gpu_num, 1);
        assert_eq!(c.iluvatars.len(), 4);
    }

    #[test]
    fn unknown_keys_are_ignored_and_absent_keys_take_go_zero_values() {
        // HAMi decodes into Go structs: a key the file leaves out is "", 0 or false.
        let c = DeviceConfig::from_yaml("nvidia:\n  defaultMemory: 1024\n  someFutureKey: 3\nextra: {a: 1}\n").unwrap();
        assert_eq!(c.nvidia.default_memory, 1024);
        assert_eq!(c.nvidia.resource_memory_name, "");
        assert_eq!(c.nvidia.default_gpu_num, 0);
        assert_eq!(c.cambricon.resource_count_name, "", "an absent section disables its vendor");
        assert!(c.iluvatars.is_empty());
    }

    #[test]
    fn vnpus_accepts_both_shapes() {
        // v2.9.0+ shape
        let new = "vnpus:\n  hamiVnpuCore: true\n  configs:\n  - commonWord: Ascend910B3\n    templates:\n    - {name: b, memory: 32768}\n    - {name: a, memory: 16384}\n";
        let c = DeviceConfig::from_yaml(new).unwrap();
        assert!(c.vnpus.hami_vnpu_core);
        assert_eq!(c.vnpus.configs[0].templates[0].name, "a", "templates are sorted by memory");
        // pre-2.9.0 shape: the list itself
        let old = "vnpus:\n- commonWord: Ascend310P\n  memoryAllocatable: 21527\n";
        let c = DeviceConfig::from_yaml(old).unwrap();
        assert_eq!(c.vnpus.configs[0].common_word, "Ascend310P");
        assert!(!c.vnpus.hami_vnpu_core);
    }

    #[test]
    fn mig_allowlist_is_validated_like_hami() {
        let ok = "nvidia:\n  migProfileAllowlist:\n  - models: [A100-SXM4-40GB]\n    profiles: [1g.5gb, 3g.20gb]\n";
        assert!(DeviceConfig::from_yaml(ok).is_ok());
        for bad in ["[g.5gb]", "[15gb]", "[1x.5gb]"] {
            let y = format!("nvidia:\n  migProfileAllowlist:\n  - models: [A100]\n    profiles: {bad}\n");
            assert!(DeviceConfig::from_yaml(&y).is_err(), "{bad} should be rejected");
        }
        let empty = "nvidia:\n  migProfileAllowlist:\n  - models: []\n    profiles: [1g.5gb]\n";
        assert!(DeviceConfig::from_yaml(empty).is_err());
    }

    #[test]
    fn malformed_yaml_is_an_error_not_a_panic() {
        assert!(DeviceConfig::from_yaml("nvidia: [unclosed").is_err());
        assert!(DeviceConfig::from_yaml("nvidia:\n  defaultMemory: lots\n").is_err());
    }
}
