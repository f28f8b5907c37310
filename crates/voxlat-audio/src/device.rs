//! Audio hosts and devices: listing them with what they support, and picking one by name.
//! A device is named by its cpal id (`alsa:pulse`, as `voxlat devices` prints it), by the
//! part after the host (`pulse`), or by a case-insensitive part of its description.

use cpal::traits::{DeviceTrait, HostTrait};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("audio host `{name}` is not available here; available: {available}")]
    UnknownHost { name: String, available: String },
    #[error("cannot open audio host {host}: {detail}")]
    Host { host: String, detail: String },
    #[error("no default {direction} device on host {host}")]
    NoDefault {
        direction: &'static str,
        host: String,
    },
    #[error("no {direction} device matches `{name}` on host {host}")]
    NotFound {
        direction: &'static str,
        name: String,
        host: String,
    },
    #[error("`{name}` matches several {direction} devices ({matches}); give the full id")]
    Ambiguous {
        direction: &'static str,
        name: String,
        matches: String,
    },
    #[error("{direction} device {device}: {detail}")]
    Stream {
        direction: &'static str,
        device: String,
        detail: String,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    Input,
    Output,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Input => "input",
            Direction::Output => "output",
        }
    }
}

/// The host named (`alsa`, `jack`, …), else cpal's default.
pub fn host(name: Option<&str>) -> Result<cpal::Host, DeviceError> {
    let Some(name) = name else {
        return Ok(cpal::default_host());
    };
    let available = cpal::available_hosts();
    let id = available
        .iter()
        .find(|h| h.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| DeviceError::UnknownHost {
            name: name.into(),
            available: available
                .iter()
                .map(|h| h.name())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    cpal::host_from_id(*id).map_err(|e| DeviceError::Host {
        host: name.into(),
        detail: e.to_string(),
    })
}

/// A device's id as `voxlat devices` prints it.
pub fn device_id(d: &cpal::Device) -> String {
    d.id()
        .map(|i| i.to_string())
        .unwrap_or_else(|_| d.to_string())
}

/// The rate a device opens at by default in `dir`.
pub fn default_rate(d: &cpal::Device, dir: Direction) -> Option<u32> {
    match dir {
        Direction::Input => d.default_input_config(),
        Direction::Output => d.default_output_config(),
    }
    .ok()
    .map(|c| c.sample_rate())
}

/// A device's human name.
pub fn device_name(d: &cpal::Device) -> String {
    d.description()
        .map(|x| x.name().to_string())
        .unwrap_or_else(|_| d.to_string())
}

/// The device `name` selects among `host`'s devices of `dir`, or the host's default.
pub fn pick(
    host: &cpal::Host,
    dir: Direction,
    name: Option<&str>,
) -> Result<cpal::Device, DeviceError> {
    let host_name = host.id().name().to_string();
    let Some(name) = name else {
        let d = match dir {
            Direction::Input => host.default_input_device(),
            Direction::Output => host.default_output_device(),
        };
        return d.ok_or(DeviceError::NoDefault {
            direction: dir.name(),
            host: host_name,
        });
    };
    let devices: Vec<cpal::Device> = match dir {
        Direction::Input => host.input_devices().map(|d| d.collect()),
        Direction::Output => host.output_devices().map(|d| d.collect()),
    }
    .map_err(|e| DeviceError::Host {
        host: host_name.clone(),
        detail: e.to_string(),
    })?;
    let exact = |d: &cpal::Device| {
        let id = device_id(d);
        id == name || id.split_once(':').is_some_and(|(_, rest)| rest == name)
    };
    if let Some(d) = devices.iter().find(|d| exact(d)) {
        return Ok(d.clone());
    }
    let lower = name.to_lowercase();
    let partial: Vec<&cpal::Device> = devices
        .iter()
        .filter(|d| device_name(d).to_lowercase().contains(&lower))
        .collect();
    match partial.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(DeviceError::NotFound {
            direction: dir.name(),
            name: name.into(),
            host: host_name,
        }),
        many => Err(DeviceError::Ambiguous {
            direction: dir.name(),
            name: name.into(),
            matches: many
                .iter()
                .map(|d| device_id(d))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ConfigRange {
    pub channels: u16,
    pub min_rate: u32,
    pub max_rate: u32,
    pub format: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceListing {
    pub id: String,
    pub name: String,
    pub default_input: bool,
    pub default_output: bool,
    pub inputs: Vec<ConfigRange>,
    pub outputs: Vec<ConfigRange>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostListing {
    pub host: String,
    pub default: bool,
    pub devices: Vec<DeviceListing>,
    pub error: Option<String>,
}

fn ranges(
    r: Result<impl Iterator<Item = cpal::SupportedStreamConfigRange>, cpal::Error>,
) -> Vec<ConfigRange> {
    r.map(|it| {
        it.map(|c| ConfigRange {
            channels: c.channels(),
            min_rate: c.min_sample_rate(),
            max_rate: c.max_sample_rate(),
            format: c.sample_format().to_string(),
        })
        .collect()
    })
    .unwrap_or_default()
}

/// Plugins such as ALSA's `pulse` enumerate no ranges but open in a default configuration.
fn or_default(
    r: Vec<ConfigRange>,
    default: Result<cpal::SupportedStreamConfig, cpal::Error>,
) -> Vec<ConfigRange> {
    if !r.is_empty() {
        return r;
    }
    default
        .map(|c| {
            vec![ConfigRange {
                channels: c.channels(),
                min_rate: c.sample_rate(),
                max_rate: c.sample_rate(),
                format: c.sample_format().to_string(),
            }]
        })
        .unwrap_or_default()
}

/// Every available host with its devices and their supported configurations.
pub fn list() -> Vec<HostListing> {
    let default_host = cpal::default_host().id();
    cpal::available_hosts()
        .into_iter()
        .map(|id| {
            let mut out = HostListing {
                host: id.name().to_string(),
                default: id == default_host,
                devices: Vec::new(),
                error: None,
            };
            let host = match cpal::host_from_id(id) {
                Ok(h) => h,
                Err(e) => {
                    out.error = Some(e.to_string());
                    return out;
                }
            };
            let def_in_dev = host.default_input_device();
            let def_out_dev = host.default_output_device();
            let def_in = def_in_dev.as_ref().map(device_id);
            let def_out = def_out_dev.as_ref().map(device_id);
            match host.devices() {
                Ok(devs) => {
                    // ALSA does not enumerate its `default` device: list the defaults first.
                    let mut all: Vec<cpal::Device> = Vec::new();
                    for d in def_in_dev.into_iter().chain(def_out_dev).chain(devs) {
                        if !all.iter().any(|x| device_id(x) == device_id(&d)) {
                            all.push(d);
                        }
                    }
                    for d in all {
                        let id = device_id(&d);
                        out.devices.push(DeviceListing {
                            name: device_name(&d),
                            default_input: def_in.as_deref() == Some(id.as_str()),
                            default_output: def_out.as_deref() == Some(id.as_str()),
                            inputs: or_default(
                                ranges(d.supported_input_configs()),
                                d.default_input_config(),
                            ),
                            outputs: or_default(
                                ranges(d.supported_output_configs()),
                                d.default_output_config(),
                            ),
                            id,
                        });
                    }
                }
                Err(e) => out.error = Some(e.to_string()),
            }
            out
        })
        .collect()
}
