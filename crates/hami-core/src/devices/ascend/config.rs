//! The device config's `vnpus` section (Ascend chips) and the Helm chart's chips.

use serde::{Deserialize, Deserializer};

/// A vNPU template a chip can be split into.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VnpuTemplate {
    pub name: String,
    pub memory: u64,
    pub ai_core: u32,
    #[serde(rename = "aiCPU")]
    pub ai_cpu: u32,
}

/// One Ascend chip of the `vnpus` section.
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

/// The device config's `vnpus` section.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct VnpuConfig {
    pub hami_vnpu_core: bool,
    pub configs: Vec<VnpuChipConfig>,
}

impl VnpuConfig {
    /// Reads the `vnpus` key in either shape: `{hamiVnpuCore, configs}` (v2.9.0+) or the older bare
    /// list of chips.
    pub fn any_shape<'de, D: Deserializer<'de>>(d: D) -> Result<VnpuConfig, D::Error> {
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
}

impl VnpuConfig {
    /// The Ascend chips of HAMi's Helm chart, used when no config file names any.
    pub fn chart_defaults() -> VnpuConfig {
        let t = |name: &str, memory: u64, ai_core: u32, ai_cpu: u32| VnpuTemplate {
            name: name.into(),
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
            chip_name: chip.into(),
            common_word: cw.into(),
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
