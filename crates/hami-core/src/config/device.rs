//! HAMi's device config file (see docs/configuration.md, "Device config file"): one section per
//! vendor, unknown keys ignored, keys case-sensitive. Absent sections take the chart's defaults so
//! a bare `serve` works. Each section's type and chart values live beside its vendor, which reads
//! them; this file only gathers them into the file and checks what spans sections.

use serde::Deserialize;

use crate::devices::{
    Enable, Vendor, Vendors, amd, ascend, awsneuron, biren, cambricon, count_only, enflame, enflame_drs, hygon,
    iluvatar, kunlun, kunlun_vxpu, metax, metax_sgpu, mthreads, nvidia, vastai,
};

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
    pub nvidia: nvidia::NvidiaConfig,
    pub cambricon: cambricon::CambriconConfig,
    pub hygon: hygon::HygonConfig,
    /// hami-rs's own: the Hygon HCU family's names beside the `hygon` section's (see
    /// `HygonConfig::families`); HAMi's files have none.
    pub hcu: hygon::HygonConfig,
    pub metax: metax::MetaxConfig,
    pub enflame: enflame::EnflameConfig,
    pub mthreads: mthreads::MthreadsConfig,
    pub iluvatars: Vec<iluvatar::IluvatarConfig>,
    pub kunlun: kunlun::KunlunConfig,
    pub awsneuron: awsneuron::AwsNeuronConfig,
    pub amd: amd::AmdConfig,
    pub vastai: count_only::CountOnlyConfig,
    pub biren: count_only::CountOnlyConfig,
    #[serde(deserialize_with = "ascend::VnpuConfig::any_shape")]
    pub vnpus: ascend::VnpuConfig,
}

impl DeviceConfig {
    /// The Helm chart's values.
    pub fn chart() -> Self {
        DeviceConfig {
            nvidia: nvidia::NvidiaConfig::chart(),
            cambricon: cambricon::CambriconConfig::chart(),
            hygon: hygon::HygonConfig::chart(),
            hcu: hygon::HygonConfig::hcu_chart(),
            metax: metax::MetaxConfig::chart(),
            enflame: enflame::EnflameConfig::chart(),
            mthreads: mthreads::MthreadsConfig::chart(),
            iluvatars: iluvatar::IluvatarConfig::chart_defaults(),
            kunlun: kunlun::KunlunConfig::chart(),
            awsneuron: awsneuron::AwsNeuronConfig::chart(),
            amd: amd::AmdConfig::chart(),
            vastai: vastai::chart(),
            biren: biren::chart(),
            vnpus: ascend::VnpuConfig::chart_defaults(),
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
        // Vendors are numbered by a byte (`VendorId`); the 15 fixed vendors and every Ascend and
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

/// `u8::MAX - 1` vendors in all (`Vendors::new`), less the 15 that are always registered.
const MAX_CHIPS: usize = 239;

// Here rather than in devices.rs: the registry is built from this file, and vendors must not
// depend on the file that aggregates them.
impl Vendors {
    /// Builds every vendor the device config enables, in HAMi's order.
    pub fn from_config(cfg: &DeviceConfig, enable: Enable) -> Vendors {
        let (dcu, hcu) = hygon::HygonConfig::families(&cfg.hygon, &cfg.hcu);
        let mut list: Vec<Box<dyn Vendor>> = vec![
            Box::new(nvidia::Nvidia::new(&cfg.nvidia)),
            Box::new(cambricon::Cambricon::new(&cfg.cambricon)),
            Box::new(hygon::Hygon::new(&dcu)),
            Box::new(hygon::Hygon::hcu(&hcu)),
            Box::new(enflame::EnflameGcu::new(&cfg.enflame)),
            Box::new(enflame_drs::EnflameDrs::new(&cfg.enflame)),
            Box::new(mthreads::Mthreads::new(&cfg.mthreads)),
            Box::new(metax::MetaxGpu::new(&cfg.metax)),
            Box::new(metax_sgpu::MetaxSgpu::new(&cfg.metax)),
            Box::new(kunlun::KunlunXpu::new(&cfg.kunlun)),
            Box::new(kunlun_vxpu::KunlunVxpu::new(&cfg.kunlun)),
            Box::new(awsneuron::AwsNeuron::new(&cfg.awsneuron)),
            Box::new(amd::Amd::new(&cfg.amd)),
            Box::new(vastai::Vastai::new(&cfg.vastai)),
            Box::new(biren::Biren::new(&cfg.biren)),
        ];
        if enable.ascend {
            for chip in &cfg.vnpus.configs {
                list.push(Box::new(ascend::Ascend::new(chip, cfg.vnpus.hami_vnpu_core)));
            }
        }
        if enable.iluvatar {
            for chip in &cfg.iluvatars {
                list.push(Box::new(iluvatar::Iluvatar::new(chip)));
            }
        }
        Vendors::new(list)
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
