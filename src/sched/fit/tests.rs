use super::*;
use crate::testing::*;
use crate::vendor::NoQuota;

#[test]
fn smoke_one_gpu_fits_on_the_emptier_device_under_spread() {
    let v = vendors();
    let n = node("a").gpu(gpu("GPU-0", 16384).used(1, 8000, 30)).gpu(gpu("GPU-1", 16384)).snapshot(&v);
    let p = pod().gpu(1).mem_mib(4096).cores(20).request_with(&v);
    let mut s = Scratch::default();
    let fit = fit_pod_devices(&n, &p, &v, &NoQuota, &mut s).unwrap();
    let (_, cs) = &fit.devices.0[0];
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0][0].uuid.as_str(), "GPU-1");
    assert_eq!(crate::model::codec::encode_pod_devices(cs), "GPU-1,NVIDIA,4096,20:;");
}
