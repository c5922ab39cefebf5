use super::*;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_plugins_order_decides_the_service() {
    let kubelet = names(&["v1.DRAPlugin", "v1beta1.DRAPlugin"]);
    assert_eq!(
        choose_service(&names(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]), &kubelet),
        Ok("v1beta1.DRAPlugin".to_owned())
    );
    assert_eq!(
        choose_service(&names(&["v2.DRAPlugin", "v1.DRAPlugin"]), &kubelet),
        Ok("v1.DRAPlugin".to_owned())
    );
    let refused = choose_service(&names(&["v1alpha4.DRAPlugin"]), &kubelet).unwrap_err();
    assert!(refused.contains("v1alpha4.DRAPlugin"), "{refused}");
    assert!(choose_service(&[], &kubelet).unwrap_err().contains("empty"));
}

#[test]
fn the_kubelets_order_decides_the_health_service() {
    let kubelet = names(&["v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]);
    let offered = names(&[
        "v1.DRAPlugin",
        "v1alpha1.DRAResourceHealth",
        "v1.DRAResourceHealth",
    ]);
    assert_eq!(
        choose_health_service(&offered, &kubelet).as_deref(),
        Some("v1.DRAResourceHealth")
    );
    assert_eq!(
        choose_health_service(&names(&["v1.DRAPlugin"]), &kubelet),
        None
    );
}
